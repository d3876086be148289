"""The CUDA driver API as the CUDA exporter uses it: loading cuda-bindings, calling an entry
point and raising on its ``CUresult``, the external-memory and external-semaphore imports with
their handle-ownership rules, the device's primary context and UUID.

Kept apart from :mod:`.cuda` (the allocations, the stream sync, the export) so each reads on its
own; :mod:`.cuda` re-exports every name here. The tests run all of it against the real
cuda-bindings types (tests/checked_cuda.py).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import ClassVar

from ..engine.external import close_os_handle
from .contract import ContractError

INSTALL_HINT = "pip install 'caliper-vk[cuda]', i.e. cuda-bindings"


class CudaInteropError(RuntimeError):
    """CUDA interop is unavailable or a driver call failed; the message names the call."""


class DeviceMismatchError(ContractError):
    """The tensor lives on another GPU than the renderer draws on."""


_driver = None


def driver():
    """``cuda.bindings.driver`` (cuda-bindings >= 12.6), or the older ``cuda.cuda`` layout."""
    global _driver
    if _driver is None:
        try:
            from cuda.bindings import driver as drv
        except ImportError:
            try:
                from cuda import cuda as drv
            except ImportError as exc:
                raise CudaInteropError(
                    f"CUDA interop needs cuda-bindings, which is not installed ({INSTALL_HINT}); "
                    "until then CUDA tensors are copied to the host every frame") from exc
        _driver = drv
    return _driver


def call(drv, name: str, *args):
    """Call ``drv.name(*args)``; cuda-bindings returns ``(err, value...)``: raise on error."""
    result = getattr(drv, name)(*args)
    result = result if isinstance(result, tuple) else (result,)
    err = result[0]
    if int(err) != 0:
        raise CudaInteropError(f"{name} failed: {getattr(err, 'name', err)}")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def handle_types(drv, kind: str) -> tuple:
    """(memory handle type, timeline semaphore handle type) for ``kind`` handles."""
    mem, sem = drv.CUexternalMemoryHandleType, drv.CUexternalSemaphoreHandleType
    if kind == "opaque-win32":
        return (mem.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32,
                sem.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32)
    if kind == "opaque-fd":
        return (mem.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
                sem.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD)
    raise ValueError(f"no CUDA handle type for {kind!r}")


def _set_handle(desc, kind: str, handle: int) -> None:
    if kind == "opaque-win32":
        desc.handle.win32.handle = handle
    else:
        desc.handle.fd = handle


def import_memory(drv, kind: str, handle: int, size: int, dedicated: bool):
    """``cuImportExternalMemory`` of a handle we own (taken over in every case)."""
    try:
        desc = drv.CUDA_EXTERNAL_MEMORY_HANDLE_DESC()
        desc.type = handle_types(drv, kind)[0]
        _set_handle(desc, kind, handle)
        desc.size = size
        desc.flags = drv.CUDA_EXTERNAL_MEMORY_DEDICATED if dedicated else 0
        ext = call(drv, "cuImportExternalMemory", desc)
    except BaseException:
        close_os_handle(kind, handle)  # not imported: the handle is still ours
        raise
    if kind == "opaque-win32":
        close_os_handle(kind, handle)  # CUDA holds its own reference to an NT handle's object
    return ext


def import_semaphore(drv, kind: str, handle: int):
    """``cuImportExternalSemaphore`` of a timeline semaphore handle (taken over in every case)."""
    try:
        desc = drv.CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC()
        desc.type = handle_types(drv, kind)[1]
        _set_handle(desc, kind, handle)
        desc.flags = 0
        ext = call(drv, "cuImportExternalSemaphore", desc)
    except BaseException:
        close_os_handle(kind, handle)
        raise
    if kind == "opaque-win32":
        close_os_handle(kind, handle)
    return ext


class Gpu:
    """One CUDA device: its primary context (torch's) and UUID. One per (driver, ordinal)."""

    _cache: ClassVar[dict] = {}
    _lock = threading.Lock()

    def __init__(self, drv, index: int):
        self.drv, self.index = drv, index
        call(drv, "cuInit", 0)
        self.device = call(drv, "cuDeviceGet", index)
        self.context = call(drv, "cuDevicePrimaryCtxRetain", self.device)  # held for the process
        self.uuid = bytes(call(drv, "cuDeviceGetUuid", self.device).bytes)

    @classmethod
    def get(cls, drv, index: int) -> Gpu:
        with cls._lock:
            key = (id(drv), index)
            if key not in cls._cache:
                cls._cache[key] = cls(drv, index)
            return cls._cache[key]

    @contextlib.contextmanager
    def current(self):
        """Make torch's (primary) context current for driver calls on this thread."""
        call(self.drv, "cuCtxPushCurrent", self.context)
        try:
            yield
        finally:
            call(self.drv, "cuCtxPopCurrent")


def torch_cuda_uuid() -> bytes | None:
    """The UUID of torch's current CUDA device, or None when this process has no CUDA torch (not
    imported, no GPU) or no driver bindings. ``CUDA_VISIBLE_DEVICES`` is honoured: the driver's
    ordinals are the remapped ones, as torch's are. Only ``cuInit`` and the device queries run
    (no context is made), and torch is not initialised here: before it is, its device is 0."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    drv = driver()
    call(drv, "cuInit", 0)
    return bytes(call(drv, "cuDeviceGetUuid", call(drv, "cuDeviceGet", index)).bytes)


def check_same_gpu(info, cuda_uuid: bytes, index: int, name: str) -> None:
    """Refuse a tensor whose GPU is not the renderer's Vulkan device."""
    if bytes(info.device_uuid) != bytes(cuda_uuid):
        raise DeviceMismatchError(
            f"{name} is on cuda:{index} (GPU UUID {bytes(cuda_uuid).hex()}), but the renderer draws on "
            f"{info.name} (UUID {bytes(info.device_uuid).hex()}); memory can only be shared on one GPU. "
            f"Draw on that GPU (set CALIPER_VK_DEVICE to its Vulkan index or name; `caliper doctor` "
            f"lists them) or attach a copy on the renderer's GPU")
