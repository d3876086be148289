"""The engine finds the Vulkan loader itself (macOS: Homebrew, VULKAN_SDK) before ``vulkan`` loads,
says what to install on each OS when there is none, and gives GLFW the same loader."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from caliper_vk.engine import loader


def test_on_macos_the_sdk_then_homebrew_is_searched(tmp_path):
    sdk, brew = tmp_path / "sdk", tmp_path / "brew"
    for lib in (sdk / "lib", brew / "opt" / "vulkan-loader" / "lib"):
        lib.mkdir(parents=True)
        (lib / "libvulkan.1.dylib").write_bytes(b"")
    env = {"VULKAN_SDK": str(sdk), "HOMEBREW_PREFIX": str(brew)}
    assert loader.find_loader("darwin", env) == str(sdk / "lib" / "libvulkan.1.dylib")
    del env["VULKAN_SDK"]
    brewed = brew / "opt" / "vulkan-loader" / "lib" / "libvulkan.1.dylib"
    assert loader.find_loader("darwin", env) == str(brewed)
    folders = [str(p.parent) for p in loader.macos_candidates({})]
    assert "/opt/homebrew/lib" in folders and "/usr/local/lib" in folders
    assert loader.find_loader("linux", env) is None and loader.find_loader("win32", env) is None


def test_the_hint_names_each_platforms_install():
    assert "brew install vulkan-loader molten-vk" in loader.no_vulkan_hint("darwin")
    assert "GPU driver" in loader.no_vulkan_hint("win32")
    assert "apt-get install libvulkan1" in loader.no_vulkan_hint("linux")


def load_loader(find: str) -> str:
    """Python code that loads engine/loader.py on its own (no engine, no vulkan yet) as ``loader``,
    with ``find_loader`` answering ``find``."""
    return ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location('loader', sys.argv[1])\n"
            "loader = importlib.util.module_from_spec(spec); spec.loader.exec_module(loader)\n"
            f"loader.find_loader = lambda: {find!r}\n")


def test_vulkan_opens_the_loader_the_engine_found():
    """A found full path is what the vulkan package opens; the package keeps its real ffi."""
    full = next((p for p in ("/usr/lib/x86_64-linux-gnu/libvulkan.so.1", "/usr/lib64/libvulkan.so.1",
                             "/usr/lib/aarch64-linux-gnu/libvulkan.so.1", "/usr/lib/libvulkan.so.1")
                 if os.path.exists(p)), None)
    if sys.platform != "linux" or full is None:
        pytest.skip("needs a Linux loader at a known path to stand in for a found one")
    code = load_loader(full) + (
        "vk = loader.import_vulkan()\n"
        "import _cffi_backend, vulkan._vulkan\n"
        "assert type(vk.ffi) is _cffi_backend.FFI and vulkan._vulkan.ffi is vk.ffi\n"
        "assert type(sys.modules['vulkan._vulkancache'].ffi) is _cffi_backend.FFI\n"
        "assert loader.get_instance_proc_addr() != 0\n"
        "print(vk.vkEnumerateInstanceVersion() >> 22)\n")
    proc = subprocess.run([sys.executable, "-c", code, loader.__file__], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"


def test_a_found_path_that_will_not_open_raises_with_the_hint():
    """Negative control of the test above: the bare name would open here, so this failure shows
    that the found path, not the name, is what the package opened."""
    code = load_loader("/nonexistent/libvulkan.1.dylib") + "loader.import_vulkan()\n"
    proc = subprocess.run([sys.executable, "-c", code, loader.__file__], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "no Vulkan loader could be opened at /nonexistent/libvulkan.1.dylib" in proc.stderr
    assert loader.no_vulkan_hint() in proc.stderr


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (apt-get install xvfb)")
def test_glfw_is_given_the_engines_loader(monkeypatch):
    """The window's GLFW gets the engine's vkGetInstanceProcAddr before it initialises, and its
    surface works with the engine's instance (one loader in the process)."""
    import glfw

    from caliper_vk.engine.window import Window
    from xvfb import xvfb

    if not hasattr(glfw, "init_vulkan_loader"):
        pytest.skip("this pyGLFW has no init_vulkan_loader (needs >= 2.11)")
    given = []
    real = glfw.init_vulkan_loader
    monkeypatch.setattr(glfw, "init_vulkan_loader", lambda address: (given.append(address), real(address)))
    with xvfb():
        window = Window((64, 48))
        try:
            assert glfw.vulkan_supported()
            assert window.surface is not None
        finally:
            window.close()
    assert given and set(given) == {loader.get_instance_proc_addr()}


def test_caches_live_in_each_platforms_cache_folder(tmp_path):
    from caliper_vk.engine.shaders import cache_dir, user_cache_root

    home = {"HOME": str(tmp_path)}
    assert user_cache_root("linux", home) == tmp_path / ".cache" / "caliper-vk"
    assert user_cache_root("darwin", home) == tmp_path / "Library" / "Caches" / "caliper-vk"
    assert user_cache_root("win32", {**home, "LOCALAPPDATA": "C:/Users/u/AppData/Local"}) == (
        Path("C:/Users/u/AppData/Local") / "caliper-vk")
    xdg = {**home, "XDG_CACHE_HOME": str(tmp_path / "x")}
    assert user_cache_root("darwin", xdg) == tmp_path / "x" / "caliper-vk"
    assert cache_dir().parent == user_cache_root()


def test_memory_figures_come_from_psutil_where_proc_is_missing(monkeypatch):
    psutil = pytest.importorskip("psutil")
    import importlib

    watch = importlib.import_module("caliper_vk.record.watch")  # the module (the package exports watch())

    real_open = open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(watch, "open", no_proc, raising=False)  # watch.py's open only (psutil reads /proc)
    rss = watch._rss_bytes()
    assert rss is not None and abs(rss - psutil.Process().memory_info().rss) < 64 * 2**20
