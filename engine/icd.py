"""Why an NVIDIA GPU that is plainly there has no Vulkan device.

The Vulkan loader finds the NVIDIA driver through an ICD manifest (``nvidia_icd.json``) that
names the driver's ``libGLX_nvidia.so.0``. Two common setups have the GPU and CUDA but neither:

- a container started without ``graphics`` in ``NVIDIA_DRIVER_CAPABILITIES`` (the NVIDIA
  container toolkit's default is ``compute,utility``): the toolkit mounts the CUDA libraries
  and not the Vulkan/GL ones;
- a compute-only driver install (the headless or ``--no-opengl-files`` packages, or a distro's
  compute meta-package): no ``libGLX_nvidia.so.0`` and no manifest.

Then the loader lists only CPU devices (lavapipe) and everything still works, slowly, through
host staging. :func:`missing_nvidia_icd` names the cause and the fix, so ``caliper doctor``, the
status line and the self-test can say it instead of leaving the user to guess. Linux only (the
Windows driver always installs its ICD; macOS has no NVIDIA driver).
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from pathlib import Path

NVIDIA_VENDOR_ID = 0x10DE
PROC_GPUS = Path("/proc/driver/nvidia/gpus")
ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d",
            "/usr/local/nvidia/share/vulkan/icd.d")
CAPABILITIES_ENV = "NVIDIA_DRIVER_CAPABILITIES"


def nvidia_gpus(proc: Path = PROC_GPUS, dev: Path = Path("/dev")) -> list[str]:
    """The NVIDIA GPUs the kernel driver shows (their model names), or ``[]``."""
    names = []
    if proc.is_dir():
        for info in sorted(proc.glob("*/information")):
            try:
                model = next((ln.split(":", 1)[1].strip() for ln in info.read_text().splitlines()
                              if ln.startswith("Model:")), "")
            except OSError:
                model = ""
            names.append(model or f"NVIDIA GPU {info.parent.name}")
    if not names and (dev / "nvidia0").exists():
        names = ["an NVIDIA GPU (/dev/nvidia0)"]
    return names


def nvidia_manifests(dirs=ICD_DIRS, env=None) -> list[str]:
    """The NVIDIA ICD manifests the loader would read: from ``VK_DRIVER_FILES`` /
    ``VK_ICD_FILENAMES`` when set (they replace the search), else from the usual folders."""
    env = os.environ if env is None else env
    listed = env.get("VK_DRIVER_FILES") or env.get("VK_ICD_FILENAMES")
    if listed:
        return [p for p in listed.split(os.pathsep) if "nvidia" in Path(p).name.lower()]
    found = []
    for d in dirs:
        folder = Path(d)
        if folder.is_dir():
            found += [str(p) for p in sorted(folder.glob("nvidia*.json"))]
    return found


def missing_nvidia_icd(devices, gpus=None, manifests=None, env=None, glx_library=None) -> str | None:
    """Why the NVIDIA GPU of this machine is not among the Vulkan ``devices`` (objects with a
    ``vendor_id``), with the fix; ``None`` when there is no NVIDIA GPU or it has its device.
    The other arguments default to this machine (tests pass their own)."""
    if sys.platform != "linux" and gpus is None:
        return None
    if any(d.vendor_id == NVIDIA_VENDOR_ID for d in devices):
        return None
    gpus = nvidia_gpus() if gpus is None else gpus
    if not gpus:
        return None
    env = os.environ if env is None else env
    what = f"{gpus[0]}{f' (and {len(gpus) - 1} more)' if len(gpus) > 1 else ''} has no Vulkan device"
    caps = env.get(CAPABILITIES_ENV)
    if caps is not None and not {"graphics", "all", "display"} & {c.strip() for c in caps.split(",")}:
        return (f"{what}: this container was started with {CAPABILITIES_ENV}={caps}, without 'graphics', "
                "so the NVIDIA container toolkit mounted no Vulkan driver; start it with "
                f"{CAPABILITIES_ENV}=all (or compute,utility,graphics)")
    manifests = nvidia_manifests(env=env) if manifests is None else manifests
    glx = ctypes.util.find_library("GLX_nvidia") if glx_library is None else glx_library
    if not manifests and not glx:
        return (f"{what}: the driver is a compute-only install (no libGLX_nvidia.so.0, no nvidia_icd.json); "
                "install the driver's graphics part (Ubuntu/Debian: libnvidia-gl-<driver version>; "
                "the .run installer without --no-opengl-files)")
    if not manifests:
        return (f"{what}: libGLX_nvidia.so.0 is installed but no nvidia_icd.json names it; write one in "
                "/usr/share/vulkan/icd.d/ or point VK_DRIVER_FILES at it")
    return (f"{what}: the loader reads {', '.join(manifests)} but lists no NVIDIA device (its library "
            "does not load: a driver/library version mismatch, or VK_DRIVER_FILES leaves it out); "
            "run with VK_LOADER_DEBUG=driver to see why")


_note: dict = {}


def cpu_fallback_note(info) -> str | None:
    """For a status line: why Caliper draws on CPU device ``info`` although an NVIDIA GPU is here
    (None when it is not a CPU device, the user chose it with ``CALIPER_VK_DEVICE``, or there is no
    such GPU). Computed once per process: the status line is refreshed every frame."""
    if info.kind != "cpu" or os.environ.get("CALIPER_VK_DEVICE"):
        return None
    if "note" not in _note:
        _note["note"] = missing_nvidia_icd([info])
    return _note["note"]
