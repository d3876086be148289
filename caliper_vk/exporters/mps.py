"""MPS tensors (Apple Silicon): MoltenVK imports the tensor's own ``MTLBuffer``.

On MPS, a storage's data pointer is the ``id<MTLBuffer>`` that holds it (PyTorch's
MPS allocator hands out whole buffers; the tensor's elements start
``storage_offset * itemsize`` bytes in). That has held since torch 2.1 and is
relied on only from there (:data:`MIN_TORCH`), and checked at run time through
the Objective-C runtime: the pointer must be an object conforming to the
``MTLBuffer`` protocol, long enough for the tensor. The engine imports it with
``VK_EXT_metal_objects`` (``VkImportMetalBufferInfoEXT`` in the allocation's
pNext chain); unified memory makes that a pointer cast — zero-copy.

Sync: Metal gives Vulkan no GPU-side primitive to wait on PyTorch's command
queue, so the producer side is on the host (:class:`HostSync`):
``panel.writing()`` waits on the host for the latest value handed out (every
frame still reading, through the timeline semaphore), and at every write's exit
runs ``torch.mps.synchronize()`` before signalling the write's fresh value — the
status line says so (docs/contract.md: the write/read counters). A frame with no
write since the last synchronises only when the producer never wrote through
``writing()`` (:meth:`HostSync.unchanged`).
MoltenVK's fast math is turned off before the instance exists
(``engine/instance.py``) so the byte-exact views stay exact.

MoltenVK 1.3.0 to 1.4.1 turn ``MVK_CONFIG_USE_MTLHEAP`` on by default, and with it
on they back an imported ``MTLBuffer``'s memory with a buffer from a fresh placement
heap instead of the imported one (fixed in 1.4.2, MoltenVK commit 89616821): the
view would draw uninitialised memory while the status line said zero-copy. The
engine sets the variable to 0 on macOS before the driver loads unless the user set
it; :func:`heap_hazard` stages MPS tensors, with that reason, where it is still on
for those versions (the user's own setting, or a driver loaded before Caliper).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

from ..engine.instance import MTLHEAP_ENV
from ..engine.sync import TimelineSemaphore
from .contract import ExternalBuffer, check_tensor, dtype_name

MIN_TORCH = (2, 1)
SYNC_NOTE = "host sync: torch.mps.synchronize() + fence"


HEAP_BUG_VERSIONS = ((1, 3, 0), (1, 4, 1))  # MoltenVK, inclusive; fixed in 1.4.2
OFF = ("0", "false", "no", "off")


def moltenvk_version(info) -> tuple[int, int, int] | None:
    """MoltenVK's version from the device's driverVersion (major*10000 + minor*100 + patch),
    or None when the device is not MoltenVK."""
    if "moltenvk" not in f"{info.driver_name} {info.driver_info}".lower():
        return None
    v = int(info.driver_version)
    return v // 10000, v // 100 % 100, v % 100


def heap_hazard(info, environ=None) -> str | None:
    """Why an imported MTLBuffer cannot be trusted on this device (the MTLHeap bug), or None."""
    version = moltenvk_version(info)
    if version is None or not HEAP_BUG_VERSIONS[0] <= version <= HEAP_BUG_VERSIONS[1]:
        return None
    value = (os.environ if environ is None else environ).get(MTLHEAP_ENV)
    if value is not None and value.strip().lower() in OFF:
        return None
    setting = f"{MTLHEAP_ENV}={value}" if value is not None else f"{MTLHEAP_ENV} unset (on by default)"
    return (f"MoltenVK {'.'.join(map(str, version))} with {setting} reads an imported MTLBuffer "
            "through a new placement-heap buffer, not the tensor (fixed in MoltenVK 1.4.2); set "
            f"{MTLHEAP_ENV}=0 before Vulkan loads or update MoltenVK")


class MetalInteropError(RuntimeError):
    """The MPS tensor's buffer cannot be imported; the message says why."""


def torch_supported(version: str) -> str | None:
    """None when ``version`` (torch.__version__) is known to expose MTLBuffers, else why not."""
    try:
        parts = tuple(int(p) for p in version.split("+")[0].split(".")[:2])
    except ValueError:
        return f"cannot read torch version {version!r}"
    if parts < MIN_TORCH:
        return (f"torch {version} predates {MIN_TORCH[0]}.{MIN_TORCH[1]}, where an MPS storage's data "
                "pointer is its MTLBuffer; upgrade torch")
    return None


class ObjC:
    """The few Objective-C runtime calls needed to check an ``id<MTLBuffer>``."""

    def __init__(self):
        path = ctypes.util.find_library("objc")
        if path is None:
            raise MetalInteropError("the Objective-C runtime (libobjc) was not found: not macOS?")
        lib = ctypes.CDLL(path)
        lib.sel_registerName.restype = ctypes.c_void_p
        lib.sel_registerName.argtypes = [ctypes.c_char_p]
        lib.objc_getProtocol.restype = ctypes.c_void_p
        lib.objc_getProtocol.argtypes = [ctypes.c_char_p]
        send = ctypes.cast(lib.objc_msgSend, ctypes.c_void_p).value
        # objc_msgSend must be called through the exact prototype (arm64 ABI)
        self._bool = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(send)
        self._ulong = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p)(send)
        self._lib = lib
        import torch

        torch.mps.synchronize()  # Metal.framework is loaded, so the MTLBuffer protocol exists

    def is_buffer(self, ptr: int) -> bool:
        protocol = self._lib.objc_getProtocol(b"MTLBuffer")
        if not protocol:
            return False
        return bool(self._bool(ptr, self._lib.sel_registerName(b"conformsToProtocol:"), protocol))

    def length(self, ptr: int) -> int:
        return int(self._ulong(ptr, self._lib.sel_registerName(b"length")))


def buffer_of(tensor, objc) -> tuple[int, int, int]:
    """(``id<MTLBuffer>`` address, byte offset of the tensor in it, buffer length), verified."""
    import torch

    why = torch_supported(torch.__version__)
    if why:
        raise MetalInteropError(why)
    ptr = tensor.untyped_storage().data_ptr()
    offset = tensor.storage_offset() * tensor.element_size()
    nbytes = tensor.numel() * tensor.element_size()
    if not ptr or not objc.is_buffer(ptr):
        raise MetalInteropError(f"torch {torch.__version__}: the MPS storage pointer is not an MTLBuffer "
                                "(the allocator changed); Caliper copies the tensor to the host instead")
    length = objc.length(ptr)
    if offset + nbytes > length:
        raise MetalInteropError(f"the MTLBuffer holds {length} bytes, fewer than the tensor's "
                                f"{offset} + {nbytes}; Caliper copies the tensor to the host instead")
    return ptr, offset, length


class HostSync:
    """The producer's side of the protocol for an MPS panel, on the host."""

    host_sync = True

    def __init__(self, timeline, flush):
        self.timeline, self._flush = timeline, flush

    @classmethod
    def create(cls, device) -> HostSync:
        import torch

        return cls(TimelineSemaphore(device), torch.mps.synchronize)

    def before_write(self, value: int) -> None:
        self.timeline.wait(value)  # every frame that read the buffer has finished

    def after_write(self, read_value: int, value: int) -> None:
        self._flush()  # MPS work that writes the buffer is complete...
        self.timeline.signal(value)  # ...before the renderer may read it

    def unchanged(self, value: int) -> None:
        """A frame with no write since the last, of a producer whose writes go through
        ``writing()`` (each synchronised at its exit): nothing of MPS's can still be writing the
        buffer, so the value is signalled without ``torch.mps.synchronize()``, which would drain
        the training's whole GPU queue for every such frame."""
        self.timeline.signal(value)

    def close(self) -> None:
        self.timeline.close()


_objc = None


def export(tensor, device, name: str = "tensor", objc=None) -> ExternalBuffer:
    """The ``metal-buffer`` record of an MPS tensor (the engine imports it in place)."""
    global _objc
    check_tensor(tensor, name, device.info.max_storage_buffer_range)
    nbytes = tensor.numel() * tensor.element_size()
    common = dict(nbytes=nbytes, dtype=dtype_name(tensor), shape=tuple(tensor.shape),
                  owner=(tensor, tensor.untyped_storage()))
    if nbytes == 0:
        return ExternalBuffer(kind="staging", handle=None, offset=0, reason="the tensor is empty", **common)
    if "VK_EXT_metal_objects" not in device.extensions:
        return ExternalBuffer(kind="staging", handle=None, offset=0,
                              reason=f"{device.info.name} lacks VK_EXT_metal_objects (MoltenVK >= 1.2)",
                              **common)
    hazard = heap_hazard(device.info)
    if hazard:
        return ExternalBuffer(kind="staging", handle=None, offset=0, reason=hazard, **common)
    if objc is None:
        _objc = _objc or ObjC()
        objc = _objc
    ptr, offset, length = buffer_of(tensor, objc)
    return ExternalBuffer(kind="metal-buffer", handle=ptr, offset=offset, memory=length,
                          semaphore=HostSync.create(device),
                          reason=f"MTLBuffer import (VK_EXT_metal_objects); {SYNC_NOTE}", **common)
