"""The Vulkan loader: found by the engine itself, loaded once, and shared with GLFW.

Why this file exists
--------------------
The ``vulkan`` package opens the loader by bare name (``libvulkan.so.1``,
``vulkan-1.dll``, ``libvulkan.dylib``) when it is imported. On Linux and Windows
the system finds it. On macOS it does not: Homebrew's prefix
(``/opt/homebrew/lib`` on Apple Silicon, ``/usr/local/lib`` on Intel) and the
Vulkan SDK (``$VULKAN_SDK/lib``) are not on dyld's default path, and setting
``DYLD_LIBRARY_PATH`` inside a running process has no effect. So before
``vulkan`` is first imported (``engine/_vk.py``, the first module the engine
loads, imports it through :func:`import_vulkan`), the engine looks for the
loader in those places and hands ``vulkan``'s ``dlopen`` the full path.

GLFW opens a loader of its own (``libvulkan.1.dylib`` on macOS) unless it is
given one: two loaders in one process hand each other foreign handles.
:func:`share_with_glfw` gives GLFW the engine's ``vkGetInstanceProcAddr``
(``glfwInitVulkanLoader``, pyGLFW >= 2.11) before GLFW initialises, so the
window and the engine always use the same loader, on every OS.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# the names the vulkan package tries, in its order
BARE_NAMES = ("libvulkan.so.1", "vulkan-1.dll", "libvulkan.dylib")
MACOS_NAMES = ("libvulkan.1.dylib", "libvulkan.dylib")


def macos_candidates(environ=None) -> list[Path]:
    """Where a Vulkan loader lives on a Mac, in the order tried: the Vulkan SDK named by
    ``VULKAN_SDK``, Homebrew's prefix (``HOMEBREW_PREFIX``, then Apple Silicon's and Intel's
    defaults, each also under ``opt/vulkan-loader``), then ``/usr/local/lib``."""
    environ = os.environ if environ is None else environ
    folders = []
    if sdk := environ.get("VULKAN_SDK"):
        folders.append(Path(sdk) / "lib")
    prefixes = [environ.get("HOMEBREW_PREFIX"), "/opt/homebrew", "/usr/local"]
    for prefix in dict.fromkeys(p for p in prefixes if p):
        folders += [Path(prefix) / "lib", Path(prefix) / "opt" / "vulkan-loader" / "lib"]
    return [folder / name for folder in dict.fromkeys(folders) for name in MACOS_NAMES]


def find_loader(platform: str = sys.platform, environ=None) -> str | None:
    """The full path of the loader the engine should open, or None to let the system find it by
    name (Linux, Windows: their loaders are on the default search path)."""
    if platform != "darwin":
        return None
    for path in macos_candidates(environ):
        if path.is_file():
            return str(path)
    return None


def no_vulkan_hint(platform: str = sys.platform) -> str:
    """What to install when no Vulkan loader or device is found, for this OS."""
    if platform == "darwin":
        return ("macOS: brew install vulkan-loader molten-vk (or install the LunarG Vulkan SDK and set "
                "VULKAN_SDK); looked in " + ", ".join(str(p.parent) for p in macos_candidates()[::2]))
    if platform == "win32":
        return ("Windows: install or update your GPU driver (it brings vulkan-1.dll), or the LunarG "
                "Vulkan SDK; a machine without a GPU can use Mesa's lavapipe")
    return ("Linux: Debian/Ubuntu: apt-get install libvulkan1 mesa-vulkan-drivers (lavapipe, a CPU "
            "device); Fedora: dnf install vulkan-loader mesa-vulkan-drivers")


def import_vulkan():
    """Import the ``vulkan`` package with the loader :func:`find_loader` chose; raise with an
    OS-specific hint when there is none.

    With a found path, ``vulkan``'s compiled ``ffi`` (whose type cannot be patched) is lent to the
    package's import behind a stand-in whose ``dlopen`` turns the bare loader names into that path;
    the package keeps the real ``ffi`` once imported, so nothing on the hot path goes through it.
    """
    if "vulkan" in sys.modules:
        return sys.modules["vulkan"]
    path = find_loader()
    cache = None
    if path is not None:
        import importlib.util

        spec = importlib.util.find_spec("vulkan")
        cache_spec = importlib.util.spec_from_file_location(
            "vulkan._vulkancache", Path(spec.origin).parent / "_vulkancache.py")
        cache = importlib.util.module_from_spec(cache_spec)
        cache_spec.loader.exec_module(cache)
        real = cache.ffi

        class FoundLoader:
            def __getattr__(self, name):
                return getattr(real, name)

            def dlopen(self, name, *args):
                return real.dlopen(path if name in BARE_NAMES else name, *args)

        cache.ffi = FoundLoader()
        sys.modules["vulkan._vulkancache"] = cache
    try:
        import vulkan
    except OSError as exc:
        for name in [m for m in sys.modules if m == "vulkan" or m.startswith("vulkan.")]:
            del sys.modules[name]
        where = f" at {path}" if path is not None else ""
        raise OSError(f"no Vulkan loader could be opened{where} ({exc}). {no_vulkan_hint()}") from None
    finally:
        if cache is not None:
            cache.ffi = real
    if cache is not None:
        vulkan._vulkan.ffi = vulkan.ffi = real
    return vulkan


def get_instance_proc_addr() -> int:
    """The address of the engine's ``vkGetInstanceProcAddr``, in the loader ``vulkan`` opened."""
    from vulkan import _vulkan

    return int(_vulkan.ffi.cast("uintptr_t", _vulkan.lib.vkGetInstanceProcAddr))


def share_with_glfw(glfw) -> bool:
    """Give GLFW the engine's loader; call before ``glfw.init()``. False when this pyGLFW (< 2.11)
    or GLFW (< 3.4) cannot take one: GLFW then opens the system's loader itself."""
    init = getattr(glfw, "init_vulkan_loader", None)
    if init is None:
        return False
    init(get_instance_proc_addr())
    return True
