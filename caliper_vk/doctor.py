"""``caliper doctor``: what this machine's Vulkan can do for Caliper, and why not.

Reports every Vulkan device (name, kind, driver, API version), which one
Caliper picks, the device profile in force (``CALIPER_VK_PROFILE``) with what it
hides and lowers, and for that device each transfer path a panel could get:
host-pointer import, opaque-FD import, timeline semaphores, CUDA interop and
Metal interop — with the reason whenever one is unavailable — and the shader
features the built-in views need (read from their SPIR-V, so the report
cannot drift from the shaders). When the machine has an NVIDIA GPU but Vulkan lists no NVIDIA
device, it says why (a container without the ``graphics`` capability, a compute-only driver) and
the fix (:mod:`caliper_vk.engine.icd`). ``caliper doctor --selftest`` adds evidence: the checks
of :mod:`caliper_vk.selftest` run on this device, saved as a report to attach to a bug report.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from dataclasses import dataclass

from .engine import Instance, limits, shaders
from .engine.icd import missing_nvidia_icd
from .engine.instance import DEVICE_ENV, FAST_MATH_ENV, VALIDATION_LAYER, validation_layer_available
from .engine.profiles import PROFILE_ENV, PROFILES


@dataclass
class Capability:
    name: str
    ok: bool
    detail: str


def _cuda_interop(info) -> Capability:
    name = "CUDA interop"
    system = platform.system()
    mem_ext = "VK_KHR_external_memory_win32" if system == "Windows" else "VK_KHR_external_memory_fd"
    sem_ext = ("VK_KHR_external_semaphore_win32" if system == "Windows"
               else "VK_KHR_external_semaphore_fd")
    if system == "Darwin":
        return Capability(name, False, "macOS has no CUDA; the Metal path is used there")
    if info.vendor_id != 0x10DE:
        return Capability(name, False, f"{info.name} is not an NVIDIA GPU "
                          "(CUDA can only share memory with a Vulkan device on the same NVIDIA GPU)")
    missing = [e for e in (mem_ext, sem_ext) if not info.has(e)]
    if missing:
        return Capability(name, False, f"the Vulkan driver lacks {', '.join(missing)}")
    if importlib.util.find_spec("torch") is None:
        return Capability(name, False, "torch is not installed")
    import torch

    if not torch.cuda.is_available():
        return Capability(name, False, f"torch {torch.__version__} has no usable CUDA device")
    if importlib.util.find_spec("cuda") is None:
        return Capability(name, False, "cuda-bindings is not installed (pip install 'caliper-vk[cuda]'); "
                          "CUDA tensors use host staging")
    from .exporters import cuda

    try:
        uuids = {i: cuda.Gpu.get(cuda.driver(), i).uuid for i in range(torch.cuda.device_count())}
    except cuda.CudaInteropError as exc:
        return Capability(name, False, str(exc))
    same = [i for i, u in uuids.items() if u == info.device_uuid]
    if not same:
        return Capability(name, False, f"no CUDA device has {info.name}'s UUID "
                          f"{info.device_uuid.hex()}; set {DEVICE_ENV} to the NVIDIA Vulkan device")
    return Capability(name, True, f"{mem_ext} + {sem_ext}; cuda:{same[0]} is this GPU (UUID match); "
                      f"torch CUDA {torch.version.cuda}; caliper_vk.empty(device='cuda') is zero-copy, "
                      "other CUDA tensors an on-device copy")


def _metal_interop(info) -> Capability:
    name = "Metal interop"
    if platform.system() != "Darwin":
        return Capability(name, False, f"Metal exists only on macOS (this is {platform.system()})")
    if not info.has("VK_EXT_metal_objects"):
        return Capability(name, False, f"{info.name} lacks VK_EXT_metal_objects (MoltenVK >= 1.2.0)")
    from .exporters.mps import heap_hazard

    hazard = heap_hazard(info)
    if hazard:
        return Capability(name, False, f"{hazard}; until then MPS tensors use host staging")
    if importlib.util.find_spec("torch") is None:
        return Capability(name, False, "torch is not installed")
    import torch

    from .exporters.mps import torch_supported

    why = torch_supported(torch.__version__)
    if why:
        return Capability(name, False, why)
    if not torch.backends.mps.is_available():
        return Capability(name, False, f"torch {torch.__version__} has no usable MPS device")
    fast = os.environ.get(FAST_MATH_ENV, "0")
    if fast not in ("0", "false", "no"):
        return Capability(name, False, f"{FAST_MATH_ENV}={fast}: MoltenVK fast math breaks exact views; "
                          "unset it")
    return Capability(name, True, "VK_EXT_metal_objects (MoltenVK); MPS tensors zero-copy, "
                      "host sync (torch.mps.synchronize + fence); fast math off")


def shaders_needing(feature: str) -> list[str]:
    """The built-in compute shaders whose SPIR-V declares the capability ``feature`` allows."""
    caps = [c for c, (f, _) in limits.CAPABILITY_FEATURES.items() if f == feature]
    stems = sorted(p.stem for p in shaders.HERE.glob("*.comp"))
    return [s for s in stems if set(caps) & limits.spirv_requirements(shaders.load(s))[0]]


def _shader_feature(info, feature: str, what: str) -> Capability:
    users = shaders_needing(feature)
    have = bool(info.features.get(feature))
    if not users:
        return Capability(what, have, f"{feature} {'present' if have else 'missing'}; "
                          "no built-in view needs it")
    names = ", ".join(users)
    if have:
        return Capability(what, True, f"{feature} (used by {names})")
    return Capability(what, False, f"{feature} missing: {names} refuse to run on this device, "
                      "naming the feature")


def capabilities(info) -> list[Capability]:
    """The transfer paths and features of one physical device, each with its reason."""
    caps = []
    host = info.has("VK_EXT_external_memory_host")
    caps.append(Capability(
        "host-pointer import", host,
        f"VK_EXT_external_memory_host, pointer alignment {info.host_pointer_alignment} B: CPU "
        "tensors can be read in place" if host else
        "the driver lacks VK_EXT_external_memory_host; CPU tensors use host staging"))
    fd = info.has("VK_KHR_external_memory_fd")
    caps.append(Capability(
        "opaque-fd import", fd,
        "VK_KHR_external_memory_fd" + (" + VK_KHR_external_semaphore_fd"
                                        if info.has("VK_KHR_external_semaphore_fd") else
                                        " (no VK_KHR_external_semaphore_fd: no shared timeline)")
        if fd else "the driver lacks VK_KHR_external_memory_fd"))
    caps.append(Capability(
        "timeline semaphores", info.timeline_semaphore,
        "Vulkan 1.2 timelineSemaphore" if info.timeline_semaphore else
        "timelineSemaphore feature missing: live attach falls back to fences"))
    for feature, what in limits.CAPABILITY_FEATURES.values():
        caps.append(_shader_feature(info, feature, what))
    caps.append(_cuda_interop(info))
    caps.append(_metal_interop(info))
    return caps


MIN_VULKAN = (1, 2)  # timeline semaphores and the device features the engine asks for are core there
MIN_MACOS_MPS = (12, 3)  # the first macOS with PyTorch's MPS backend
MIN_MOLTENVK = (1, 2, 0)  # VK_EXT_metal_objects, the Metal interop path


def _parse(version: str) -> tuple[int, ...]:
    parts = []
    for p in version.split("."):
        digits = "".join(c for c in p if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _dotted(version) -> str:
    return ".".join(map(str, version))


def version_checks(system: str, loader: int | None, device_name: str, device_api: int,
                   mac_release: str = "", moltenvk: tuple[int, int, int] | None = None,
                   heap: str | None = None) -> list[Capability]:
    """The versions Caliper needs, against those seen here (a pure function; docs/platforms.md).

    ``loader`` is ``vkEnumerateInstanceVersion()`` (None: a Vulkan 1.0 loader, which lacks it);
    ``device_api`` the chosen device's ``apiVersion``; ``mac_release`` ``platform.mac_ver()[0]``;
    ``moltenvk`` MoltenVK's version read from the device's driver version (None: not MoltenVK);
    ``heap`` the MTLHeap hazard of MoltenVK 1.3.0-1.4.1 (:func:`caliper_vk.exporters.mps.heap_hazard`).
    """
    need = _dotted(MIN_VULKAN)
    loader_v = (1, 0, 0) if loader is None else (loader >> 22, (loader >> 12) & 0x3FF, loader & 0xFFF)
    caps = [Capability("Vulkan loader", loader_v[:2] >= MIN_VULKAN,
                       f"{_dotted(loader_v)}" + ("" if loader_v[:2] >= MIN_VULKAN else
                                                 f" is too old: Caliper needs >= {need}; update the "
                                                 "Vulkan runtime (docs/platforms.md, Install)"))]
    api = (device_api >> 22, (device_api >> 12) & 0x3FF, device_api & 0xFFF)
    caps.append(Capability("Vulkan driver", api[:2] >= MIN_VULKAN,
                           f"{device_name} speaks Vulkan {_dotted(api)}" + (
                               "" if api[:2] >= MIN_VULKAN else
                               f", too old: Caliper needs >= {need}; update the GPU driver")))
    if system != "Darwin":
        return caps
    mac = _parse(mac_release)
    if not mac:
        caps.append(Capability("macOS", False, "version unknown (platform.mac_ver() gave nothing)"))
    else:
        ok = mac >= MIN_MACOS_MPS
        caps.append(Capability("macOS", ok, f"{mac_release}" + (
            " (MPS tensors: yes)" if ok else
            f" is too old for MPS tensors (torch needs >= {_dotted(MIN_MACOS_MPS)}); "
            "CPU tensors still draw")))
    if moltenvk is None:
        caps.append(Capability("MoltenVK", False, f"{device_name} is not driven by MoltenVK: the Metal "
                               f"path needs MoltenVK >= {_dotted(MIN_MOLTENVK)}"))
    elif moltenvk < MIN_MOLTENVK:
        caps.append(Capability("MoltenVK", False, f"{_dotted(moltenvk)} is too old: the Metal path needs "
                               f">= {_dotted(MIN_MOLTENVK)} (VK_EXT_metal_objects); update the Vulkan SDK "
                               "or Homebrew's molten-vk"))
    elif heap:
        caps.append(Capability("MoltenVK", False, heap))
    else:
        caps.append(Capability("MoltenVK", True, _dotted(moltenvk)))
    return caps


def _versions(chosen) -> list[Capability]:
    from .engine._vk import vk
    from .exporters.mps import heap_hazard, moltenvk_version

    try:
        loader = int(vk.vkEnumerateInstanceVersion())
    except Exception:  # a 1.0 loader has no vkEnumerateInstanceVersion
        loader = None
    return version_checks(platform.system(), loader, chosen.name, chosen.api_version_int,
                          platform.mac_ver()[0], moltenvk_version(chosen), heap_hazard(chosen))


def profile_lines(profile, info) -> list[str]:
    """The device profile in force and what it changes on ``info``."""
    if profile is None:
        return [f"Device profile: none ({PROFILE_ENV} unset; known: {', '.join(PROFILES)})"]
    lines = [f"Device profile: {profile.name} ({PROFILE_ENV}): {profile.summary}"]
    changes = info.profile_changes or ("nothing: this device already has no more than the profile",)
    lines += [f"  hides/lowers: {c}" for c in changes]
    return lines


def held_memory() -> str:
    """The device memory Caliper holds in this process (its default device), in one line."""
    from .engine import canvas

    device = canvas._default_device
    if device is None or device.handle is None:
        return ("device memory Caliper holds in this process: none yet (a live session holds its "
                "canvas, one copy per on-device-copy panel and its history, 64 MB by default; its "
                "status line shows the total on a GPU)")
    stats = device.memory_stats
    return (f"device memory Caliper holds in this process: {stats['allocated_bytes'] / 1e6:.1f} MB in "
            f"{stats['allocations']} allocations, and {stats['imported_bytes'] / 1e6:.1f} MB of tensors "
            "imported in place")


def report() -> str:
    """The doctor's text report (raises NoDeviceError with advice when Vulkan is absent)."""
    lines = []
    with Instance(validation=False) as inst:
        devices = inst.physical_devices()
        lines.append(f"Vulkan devices ({len(devices)}):")
        for d in devices:
            lines.append(f"  [{d.index}] {d.name} ({d.kind}), driver {d.driver_name} "
                         f"{d.driver_info}, Vulkan {d.api_version}")
        gap = missing_nvidia_icd(devices)
        if gap:
            lines.append(f"  [ no] NVIDIA Vulkan driver: {gap}")
        chosen = inst.select()
        lines.append(f"Caliper uses: [{chosen.index}] {chosen.name} "
                     f"(set {DEVICE_ENV} to choose another)")
        lines.append(f"  device UUID {chosen.device_uuid.hex()}, "
                     f"maxStorageBufferRange {chosen.max_storage_buffer_range} B")
        lines.append(f"  {held_memory()}")
        lines.append("Versions (minimums: docs/platforms.md):")
        for cap in _versions(chosen):
            lines.append(f"  [{'yes' if cap.ok else ' no'}] {cap.name}: {cap.detail}")
        lines += profile_lines(inst.profile, chosen)
        lines.append("Transfer paths and features:")
        for cap in capabilities(chosen):
            lines.append(f"  [{'yes' if cap.ok else ' no'}] {cap.name}: {cap.detail}")
    lines.append("Tools:")
    from .engine.shaders import find_tool

    compiler = find_tool("glslc") or find_tool("glslangValidator")
    lines.append(f"  [{'yes' if compiler else ' no'}] GLSL compiler (custom shader modules): "
                 + (compiler or "not found; apt-get install glslc, or pip install 'caliper-vk[glsl]'"))
    layers = validation_layer_available()
    lines.append(f"  [{'yes' if layers else ' no'}] Khronos validation layer: "
                 + (VALIDATION_LAYER if layers else "not found; apt-get install vulkan-validationlayers"))
    return "\n".join(lines)
