"""CUDA tensors: one VRAM allocation seen by CUDA and Vulkan, ordered on the GPU.

Who allocates
-------------
Memory from torch's caching allocator cannot be imported by Vulkan, so shared
memory is allocated for the purpose. Two directions exist; Caliper's default is
**Vulkan allocates, CUDA imports** (Datoviz and Taichi chose it; Datoviz found
the other one unreliable): :class:`SharedMemory` makes a dedicated, exportable
``VkDeviceMemory`` (``engine.external.ExportableBuffer``), exports an opaque fd
(Linux) or Win32 handle (Windows), imports it with ``cuImportExternalMemory``,
maps it with ``cuExternalMemoryGetMappedBuffer`` and hands torch the pointer
through ``__cuda_array_interface__`` (``torch.as_tensor``: no copy; the tensor's
storage holds the allocation). The other direction, **CUDA allocates (VMM),
Vulkan imports** (NVIDIA's ``simpleVulkanMMAP``), is :class:`VmmMemory`
(``cuMemCreate`` with a POSIX-fd handle type, Linux only), chosen with
``CALIPER_VK_CUDA_ALLOC=vmm``.

- ``caliper_vk.empty(shape, device="cuda")`` returns a tensor in shared memory:
  attaching it is **zero-copy** (the producer writes what the renderer reads).
- Any other CUDA tensor is **mirrored**: shared memory of its size, refreshed by
  a device-to-device ``copy_`` on torch's current stream at every write's exit.

Sync: the panel's Vulkan timeline semaphore is created exportable, exported and
imported into CUDA as a timeline semaphore; :class:`StreamSync` waits and
signals it with ``cuWaitExternalSemaphoresAsync`` / ``cuSignalExternalSemaphoresAsync``
on torch's current stream, following docs/contract.md's write/read counters:
every write's exit signals a fresh value ``w`` (after the write's kernels), a
frame waits for the latest write value it saw, reads and signals its own value,
and a producer about to overwrite waits for the latest value handed out (every
frame still reading). Values only rise. No CPU thread waits.

Handle ownership: an fd imported into CUDA (or Vulkan) is the importer's after a
successful import and ours to close after a failed one; a Win32 handle is
closed by us after the import either way (:func:`import_memory`,
:func:`import_semaphore`).

Tensors on another GPU than the renderer's are refused: the Vulkan device's
``deviceUUID`` must equal ``cuDeviceGetUuid`` of the tensor's device.

cuda-bindings (``cuda.bindings.driver``, the ``[cuda]`` extra; cuda-python >= 12.6
pulls it in) is imported on first use; without it CUDA tensors are drawn through
host staging and the reason says ``pip install 'caliper-vk[cuda]'``. The tests run
every driver call here against the real bindings' types (tests/checked_cuda.py).
"""

from __future__ import annotations

import os
import weakref

from ..engine.external import (
    ExportableBuffer,
    MemoryExport,
    close_os_handle,
    import_external_memory,
    platform_handle_kind,
)
from ..engine.sync import TimelineSemaphore
from .contract import ExternalBuffer, check_tensor, dtype_name
from .cuda_driver import (
    INSTALL_HINT,
    CudaInteropError,
    DeviceMismatchError,
    Gpu,
    call,
    check_same_gpu,
    driver,
    handle_types,
    import_memory,
    import_semaphore,
)

ALLOCATOR_ENV = "CALIPER_VK_CUDA_ALLOC"  # "vulkan" (default) or "vmm"


def _cuda_index(device) -> int:
    import torch

    device = torch.device(device)
    return device.index if device.index is not None else torch.cuda.current_device()


# The two places where torch (not the driver) meets the shared memory; module functions so the
# tests, on a CPU-only torch, can stand in for CUDA tensors while the driver calls stay real.
def as_cuda_tensor(array, index: int):
    """A ``torch.uint8`` CUDA tensor over ``array.__cuda_array_interface__`` (no copy)."""
    import torch

    return torch.as_tensor(array, device=f"cuda:{index}")


def current_stream(torch_device) -> int:
    """The ``CUstream`` handle of torch's current stream on ``torch_device``."""
    import torch

    return torch.cuda.current_stream(torch_device).cuda_stream


def on_stream(torch_device, stream: int):
    """Torch's work inside runs on the CUDA stream whose handle is ``stream``."""
    import torch

    return torch.cuda.stream(torch.cuda.ExternalStream(stream, device=torch_device))


class _CudaArray:
    """``__cuda_array_interface__`` over shared memory; torch's tensor holds it, and it
    holds the allocation, so the memory lives exactly as long as the tensor's storage."""

    def __init__(self, ptr: int, nbytes: int, owner):
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2}


def _release(gpu: Gpu, steps) -> None:
    """Free a shared allocation once no tensor uses it (a finalizer: never raises)."""
    try:
        with gpu.current():
            call(gpu.drv, "cuCtxSynchronize")  # kernels queued on any stream may still use it
            for name, obj in steps:
                call(gpu.drv, name, obj)
    except Exception:  # interpreter shutdown: CUDA may be gone already
        pass


def _release_shared(gpu: Gpu, ptr, ext, buffer) -> None:
    # CUDA lets go first (unmap, destroy the import); Vulkan frees after its last frame.
    _release(gpu, [("cuMemFree", ptr), ("cuDestroyExternalMemory", ext)])
    buffer.close()


class SharedMemory:
    """VRAM allocated by Vulkan (exportable) and imported into CUDA. The default.

    Parameters
    ----------
    device : engine.Device
        The Vulkan device that allocates (must be the tensor's GPU).
    nbytes : int
        Bytes the tensor needs.
    index : int
        The CUDA device ordinal (torch's).
    """

    def __init__(self, device, nbytes: int, index: int, drv=None, kind: str | None = None):
        drv = drv or driver()
        self.kind = kind or platform_handle_kind()
        self.gpu = Gpu.get(drv, index)
        check_same_gpu(device.info, self.gpu.uuid, index, "the shared allocation")
        self.nbytes = int(nbytes)
        self.buffer = ExportableBuffer(device, max(1, self.nbytes), self.kind)
        handle = None  # ours until import_memory takes it (it does in every case)
        try:
            handle, memory = self.buffer.export()
            with self.gpu.current():  # cuCtxPushCurrent may fail: the handle is still ours then
                owned, handle = handle, None
                ext = import_memory(drv, self.kind, owned, memory.allocation_size, memory.dedicated)
                try:
                    desc = drv.CUDA_EXTERNAL_MEMORY_BUFFER_DESC()
                    desc.offset, desc.size, desc.flags = 0, self.buffer.size, 0
                    ptr = call(drv, "cuExternalMemoryGetMappedBuffer", ext, desc)
                except BaseException:
                    call(drv, "cuDestroyExternalMemory", ext)
                    raise
        except BaseException:
            if handle is not None:
                close_os_handle(self.kind, handle)
            self.buffer.close()
            raise
        self.ptr = int(ptr)
        self._finalizer = weakref.finalize(self, _release_shared, self.gpu, ptr, ext, self.buffer)

    def export(self) -> tuple[int, MemoryExport]:
        """A new handle to the memory for a Vulkan import (the caller owns it)."""
        return self.buffer.export()

    def tensor(self, shape, dtype):
        """A torch tensor over the memory (no copy); it keeps this allocation alive."""
        import torch

        raw = as_cuda_tensor(_CudaArray(self.ptr, max(1, self.nbytes), self), self.gpu.index)
        itemsize = torch.empty((), dtype=dtype).element_size()
        count = 1
        for s in shape:
            count *= int(s)
        return raw[: count * itemsize].view(dtype).reshape(tuple(int(s) for s in shape))


class VmmMemory:
    """VRAM allocated by CUDA's VMM API (exportable as a POSIX fd) and imported by Vulkan,
    as NVIDIA's ``simpleVulkanMMAP`` does. Opt-in (``CALIPER_VK_CUDA_ALLOC=vmm``), Linux only."""

    def __init__(self, device, nbytes: int, index: int, drv=None, kind: str | None = None):
        drv = drv or driver()
        self.kind = kind or platform_handle_kind()
        if self.kind != "opaque-fd":
            raise CudaInteropError("the VMM allocation direction is built for POSIX fds (Linux); "
                                   f"unset {ALLOCATOR_ENV} to use Vulkan-allocated memory")
        self.gpu = gpu = Gpu.get(drv, index)
        check_same_gpu(device.info, gpu.uuid, index, "the shared allocation")
        self.device_uuid, self.nbytes = device.info.device_uuid, int(nbytes)
        prop = drv.CUmemAllocationProp()
        prop.type = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = index
        prop.requestedHandleTypes = drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        steps = []  # undo list, newest first
        with gpu.current():
            try:
                gran = call(drv, "cuMemGetAllocationGranularity", prop,
                            drv.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
                self.size = max(1, -(-max(1, self.nbytes) // int(gran))) * int(gran)
                self.handle = call(drv, "cuMemCreate", self.size, prop, 0)
                steps.insert(0, ("cuMemRelease", self.handle))
                ptr = call(drv, "cuMemAddressReserve", self.size, 0, 0, 0)
                steps.insert(0, ("cuMemAddressFree", ptr, self.size))
                call(drv, "cuMemMap", ptr, self.size, 0, self.handle, 0)
                steps.insert(0, ("cuMemUnmap", ptr, self.size))
                access = drv.CUmemAccessDesc()
                access.location = prop.location
                access.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                call(drv, "cuMemSetAccess", ptr, self.size, [access], 1)
            except BaseException:
                for name, *args in steps:
                    call(drv, name, *args)
                raise
        self.ptr = int(ptr)
        self._finalizer = weakref.finalize(self, _release_vmm, gpu, steps)

    def export(self) -> tuple[int, MemoryExport]:
        drv = self.gpu.drv
        with self.gpu.current():
            fd = call(drv, "cuMemExportToShareableHandle", self.handle,
                      drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
        return int(fd), MemoryExport(self.kind, self.size, self.size, None, False, self.device_uuid)

    tensor = SharedMemory.tensor


def _release_vmm(gpu: Gpu, steps) -> None:
    try:
        with gpu.current():
            call(gpu.drv, "cuCtxSynchronize")
            for name, *args in steps:
                call(gpu.drv, name, *args)
    except Exception:  # interpreter shutdown: CUDA may be gone already
        pass


def allocator():
    """The class that allocates shared memory (``CALIPER_VK_CUDA_ALLOC``)."""
    choice = os.environ.get(ALLOCATOR_ENV, "vulkan").strip().lower()
    if choice not in ("vulkan", "vmm"):
        raise CudaInteropError(f"{ALLOCATOR_ENV}={choice!r}: use 'vulkan' (default) or 'vmm'")
    return VmmMemory if choice == "vmm" else SharedMemory


# storage data pointer -> the shared allocation, for tensors from empty()
_shared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def shared_memory_of(tensor):
    """The allocation behind ``tensor`` when it comes from :func:`empty`, else None."""
    storage = tensor.untyped_storage()
    shared = _shared.get(storage.data_ptr())
    if shared is None or storage.nbytes() > max(1, shared.nbytes):
        return None
    return shared


def empty(shape, dtype=None, device="cuda", vk_device=None):
    """A CUDA tensor in VRAM the renderer reads in place (true zero-copy)."""
    import torch

    from ..engine import default_device

    dtype = dtype or torch.float32
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    itemsize = torch.empty((), dtype=dtype).element_size()
    count = 1
    for s in shape:
        count *= s
    memory = allocator()(vk_device or default_device(), count * itemsize, _cuda_index(device))
    t = memory.tensor(shape, dtype)
    _shared[t.untyped_storage().data_ptr()] = memory
    check_tensor(t, "caliper_vk.empty(device='cuda')")
    return t


class CudaGraphCaptureError(CudaInteropError):
    """``panel.writing()`` or a frame's booking ran while torch's stream was capturing a CUDA graph."""


def _capture_message(what: str) -> str:
    return (f"{what} ran while torch's CUDA stream is capturing a graph: the timeline values Caliper "
            "waits on and signals would be baked into the graph, and every replay would signal old "
            "values again (a hang, or a timeline moving backwards). Keep writing() and "
            "caliper_vk.step() outside the captured region and wrap the replay instead: "
            "`with panel.writing(): graph.replay()` orders the replay's writes like any others")


class StreamSync:
    """The producer's side of the protocol for one CUDA panel, on torch's current stream.

    ``timeline`` is the Vulkan timeline semaphore the renderer's frames wait on and
    signal; ``ext`` is the same semaphore imported into CUDA. ``mirror`` is
    ``(tensor, copy)`` for an on-device-copy panel: the copy in shared memory is
    refreshed in :meth:`after_write`, after the previous read finished.

    Streams: a write's wait and its exit's signal go on one stream, the one current at
    ``writing()`` entry (:meth:`before_write` takes it, :meth:`after_write` uses it), whatever
    stream the body switched to; kernels the body queues on another stream must be ordered
    with it by the caller (``stream.wait_stream``), as for any torch work across streams. A
    frame's own signal (no write since the last frame) goes on the stream current at
    ``step()``. Every wait and signal is followed by ``cuStreamQuery`` of its stream, which
    submits the queued work on drivers that batch it (Windows WDDM), so a signal never sits in
    a host-side queue while another thread waits for it. Under CUDA graph capture both refuse
    (:class:`CudaGraphCaptureError`). After a renderer fault :meth:`release` reaches every
    value the stream may wait on from a stream of its own (``WriteRead.stop``).
    """

    host_sync = False

    def __init__(self, timeline, ext, gpu: Gpu, stream, mirror=None):
        self.timeline, self.ext, self.gpu, self.mirror = timeline, ext, gpu, mirror
        self._stream = stream  # () -> the stream handle (int) torch has current now
        self._writes: list[int] = []  # the stream of each open writing(), innermost last
        self._own = None  # a non-blocking stream of ours, made on the first release()

    @classmethod
    def create(cls, device, gpu: Gpu, torch_device, kind: str, mirror=None) -> StreamSync:
        timeline = TimelineSemaphore(device, export=kind)
        handle = None  # ours until import_semaphore takes it (it does in every case)
        try:
            handle = timeline.export_handle()
            with gpu.current():  # cuCtxPushCurrent may fail: the handle is still ours then
                owned, handle = handle, None
                ext = import_semaphore(gpu.drv, kind, owned)
        except BaseException:
            if handle is not None:
                close_os_handle(kind, handle)
            timeline.close()
            raise
        return cls(timeline, ext, gpu, lambda: current_stream(torch_device), mirror)

    def _refuse_capture(self, stream, what: str) -> None:
        drv = self.gpu.drv
        status = call(drv, "cuStreamIsCapturing", drv.CUstream(stream))
        if status != drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            raise CudaGraphCaptureError(_capture_message(what))

    def refuse_capture(self, what: str = "caliper_vk.step()") -> None:
        """Raise :class:`CudaGraphCaptureError` when torch's current stream is capturing."""
        with self.gpu.current():
            self._refuse_capture(self._stream(), what)

    def _issue(self, name: str, params_type: str, value: int, stream) -> None:
        drv = self.gpu.drv
        params = getattr(drv, params_type)()
        params.params.fence.value = value
        params.flags = 0
        handle = drv.CUstream(stream)
        call(drv, name, [self.ext], [params], 1, handle)
        # WDDM keeps queued work on the host until a sync or a query: submit it now
        err = drv.cuStreamQuery(handle)[0]
        if int(err) not in (0, int(drv.CUresult.CUDA_ERROR_NOT_READY)):
            raise CudaInteropError(f"cuStreamQuery failed: {getattr(err, 'name', err)}")

    def wait(self, value: int, stream=None) -> None:
        """Later work on the stream (default: torch's current one) waits until the renderer
        reached ``value``."""
        with self.gpu.current():
            self._issue("cuWaitExternalSemaphoresAsync", "CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS", value,
                        self._stream() if stream is None else stream)

    def signal(self, value: int, stream=None) -> None:
        """The semaphore reaches ``value`` once the stream's earlier work is done."""
        with self.gpu.current():
            self._issue("cuSignalExternalSemaphoresAsync", "CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS", value,
                        self._stream() if stream is None else stream)

    def before_write(self, value: int) -> None:
        """``panel.writing()`` entry: take the stream current now (the exit uses it too); the
        producer's next kernels wait for ``value``, the latest value handed out (every frame
        booked so far has read)."""
        stream = self._stream()
        with self.gpu.current():
            self._refuse_capture(stream, "panel.writing()")
        if self.mirror is None:  # a mirrored tensor is the producer's own: nobody reads it
            self.wait(value, stream)
        self._writes.append(stream)

    def after_write(self, read_value: int, value: int) -> None:
        """The write is complete when the stream gets here: signal its fresh value ``value``
        (for a mirror, first wait for ``read_value`` and refresh the copy). Inside
        ``writing()`` on the stream its entry took; for a frame's own value on torch's current
        stream (after the capture check)."""
        if self._writes:
            stream = self._writes.pop()
        else:
            stream = self._stream()
            with self.gpu.current():
                self._refuse_capture(stream, "caliper_vk.step()")
        if self.mirror is not None:
            self.wait(read_value, stream)  # the renderer finished reading the copy
            source, copy = self.mirror
            if stream == self._stream():
                copy.copy_(source)  # bytes never leave the GPU
            else:  # the body switched streams: the copy goes where the wait and signal go
                with on_stream(source.device, stream):
                    copy.copy_(source)
        self.signal(value, stream)

    def release(self, value: int) -> None:
        """Drawing stopped for good and the device may be lost: signal ``value`` (the latest
        handed out, so every value a stream waits on) from a non-blocking stream of our own,
        which waits for nothing, so no CUDA wait queued before the fault waits forever."""
        drv = self.gpu.drv
        with self.gpu.current():
            if self._own is None:
                self._own = call(drv, "cuStreamCreate", int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING))
        self.signal(value, int(self._own))

    def close(self) -> None:
        if self.ext is None:
            return
        ext, self.ext = self.ext, None
        with self.gpu.current():
            call(self.gpu.drv, "cuCtxSynchronize")  # waits/signals still queued must finish first
            call(self.gpu.drv, "cuDestroyExternalSemaphore", ext)
            if self._own is not None:
                own, self._own = self._own, None
                call(self.gpu.drv, "cuStreamDestroy", own)
        self.timeline.close()
        self.mirror = None


def export(tensor, device, name: str = "tensor", drv=None) -> ExternalBuffer:
    """The record for a CUDA tensor on the renderer's ``device`` (zero-copy or mirrored)."""
    check_tensor(tensor, name, device.info.max_storage_buffer_range)
    drv = drv or driver()
    index = _cuda_index(tensor.device)
    gpu = Gpu.get(drv, index)
    check_same_gpu(device.info, gpu.uuid, index, name)
    nbytes = tensor.numel() * tensor.element_size()
    common = dict(nbytes=nbytes, dtype=dtype_name(tensor), shape=tuple(tensor.shape),
                  device_uuid=gpu.uuid)
    if nbytes == 0:
        return ExternalBuffer(kind="staging", handle=None, offset=0, owner=(tensor,),
                              reason="the tensor is empty", **common)
    kind = platform_handle_kind()
    shared = shared_memory_of(tensor)
    if shared is not None:
        offset, mirror = tensor.data_ptr() - shared.ptr, None
        reason = "caliper_vk.empty(device='cuda') memory; sync on torch's CUDA stream"
    else:
        shared = allocator()(device, nbytes, index, drv, kind)
        offset = 0
        mirror = (tensor.detach(), shared.tensor(tuple(tensor.shape), tensor.dtype))
        reason = ("not from caliper_vk.empty(device='cuda'): copied once per frame into shared VRAM "
                  "on torch's stream")
    sync = StreamSync.create(device, gpu, tensor.device, kind, mirror)
    try:
        handle, memory = shared.export()
    except BaseException:
        sync.close()
        raise
    return ExternalBuffer(kind=kind, handle=handle, offset=offset, semaphore=sync,
                          owner=(tensor, tensor.untyped_storage(), shared), reason=reason,
                          memory=memory, mirrored=mirror is not None, **common)


def import_for_vulkan(device, record):
    """Import the record's handle into ``device`` (consumes it); see exporters.import_external."""
    handle, record.handle = record.handle, None
    return import_external_memory(device, handle, record.memory, record.offset, keepalive=record.owner)


__all__ = [  # the driver plumbing lives in .cuda_driver and is re-exported here, as it always was
    "ALLOCATOR_ENV", "INSTALL_HINT", "CudaGraphCaptureError", "CudaInteropError", "DeviceMismatchError", "Gpu",
    "SharedMemory", "StreamSync", "VmmMemory", "allocator", "as_cuda_tensor", "call", "check_same_gpu",
    "current_stream", "driver", "empty", "export", "handle_types", "import_for_vulkan", "import_memory",
    "import_semaphore", "on_stream", "shared_memory_of",
]
