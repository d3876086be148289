"""Torch tensor → live input, under the v1 contract (docs/contract.md).

:func:`open_input` is the one way in: any tensor becomes one
:class:`LiveInput` carrying the imported memory (or the staged copy), its path,
the reason and the producer-side sync (:mod:`.live_input`). Beneath it,
:func:`export` picks the exporter for the tensor's device: CPU tensors are
imported in place where the driver allows (:mod:`.cpu`); CUDA tensors share
VRAM with Vulkan through opaque fd / Win32 handles (:mod:`.cuda`, zero-copy for
``empty(device="cuda")`` tensors, an on-device copy otherwise); MPS tensors'
``MTLBuffer`` is imported by MoltenVK (:mod:`.mps`). Where interop is not
possible the record says ``staging`` and why, so the status line can.
:mod:`.discrete` is an emulated discrete GPU for CI (``CALIPER_VK_EMULATE=discrete``): device
tensors whose host views are counted snapshots.
:func:`import_external` turns a GPU record into an engine buffer on the
renderer's device; :func:`release` frees what an unused record holds.
"""

from __future__ import annotations

from ..engine.external import ExternalMemoryError, import_metal_buffer
from ..engine.instance import UUID_PREFERENCES
from ..engine.sync import SemaphoreExportError
from . import cpu, discrete
from .contract import (
    CONTRACT_VERSION,
    SUPPORTED_DTYPES,
    ContractError,
    ExternalBuffer,
    LifetimeError,
    NotContiguousError,
    TooLargeError,
    UnsupportedDtypeError,
    check_tensor,
    check_unchanged,
    dtype_name,
    storage_fingerprint,
)
from .cuda_driver import torch_cuda_uuid
from .live_input import (
    GPU_KINDS,
    PATH_DEVICE_COPY,
    PATH_HOST,
    PATH_STAGING,
    PATH_ZERO_COPY,
    LiveInput,
    open_input,
)


# the renderer draws on torch's current CUDA device when nothing else forces the choice
if torch_cuda_uuid not in UUID_PREFERENCES:
    UUID_PREFERENCES.append(torch_cuda_uuid)
if discrete.enabled():  # CALIPER_VK_EMULATE=discrete: torch.cuda's calls act on the emulated device
    discrete.install()

# what makes a GPU exporter fall back to staging (anything else is a bug and is raised)
_UNAVAILABLE = (ExternalMemoryError, SemaphoreExportError)


def _staging(tensor, why: str) -> ExternalBuffer:
    return ExternalBuffer(kind="staging", handle=None, offset=0,
                          nbytes=tensor.numel() * tensor.element_size(), dtype=dtype_name(tensor),
                          shape=tuple(tensor.shape), owner=(tensor, tensor.untyped_storage()),
                          reason=f"{why}: the tensor is copied to the host every frame")


def export(tensor, device_info, name: str = "tensor", device=None) -> ExternalBuffer:
    """An :class:`ExternalBuffer` for ``tensor`` on the renderer's device.

    ``device`` (the renderer's ``engine.Device``) is needed for GPU tensors, whose
    shared memory and semaphores live on it; without it they are staged.
    A tensor on another GPU than the renderer's raises ``cuda.DeviceMismatchError``.
    """
    check_tensor(tensor, name, device_info.max_storage_buffer_range)
    kind = tensor.device.type
    if kind == "cpu":
        return cpu.export(tensor, device_info, name)
    if discrete.is_emulated(tensor):
        return discrete.export(tensor, device_info, name, device)
    if kind not in ("cuda", "mps"):
        return _staging(tensor, f"no exporter for {kind} tensors")
    if device is None:
        return _staging(tensor, f"no Vulkan device was given for {kind.upper()} interop")
    if kind == "cuda":
        from . import cuda

        try:
            return cuda.export(tensor, device, name)
        except (*_UNAVAILABLE, cuda.CudaInteropError) as exc:
            return _staging(tensor, f"CUDA interop unavailable ({exc})")
    from . import mps

    try:
        return mps.export(tensor, device, name)
    except (*_UNAVAILABLE, mps.MetalInteropError) as exc:
        return _staging(tensor, f"Metal interop unavailable ({exc})")


def import_external(device, record: ExternalBuffer):
    """An engine buffer over a GPU record's memory on ``device`` (consumes an fd/handle).

    Raises ``engine.external.ExternalMemoryError`` when the driver refuses; the
    record's handle and sync are released then, so the caller can stage instead.
    """
    try:
        if record.kind in ("opaque-fd", "opaque-win32"):
            from .cuda import import_for_vulkan

            return import_for_vulkan(device, record)
        if record.kind == "metal-buffer":
            return import_metal_buffer(device, record.handle, record.memory, record.offset,
                                       keepalive=record.owner)
    except ExternalMemoryError:
        release(record)
        raise
    raise ValueError(f"{record.kind} records are not imported this way")


def release(record: ExternalBuffer) -> None:
    """Close what a record holds that nothing imported: its fd/handle and its GPU sync."""
    if record.kind in ("opaque-fd", "opaque-win32") and record.handle is not None:
        from ..engine.external import close_os_handle

        handle, record.handle = record.handle, None
        close_os_handle(record.kind, handle)
    if record.semaphore is not None:
        sync, record.semaphore = record.semaphore, None
        sync.close()


def empty(shape, dtype=None, device="cpu"):
    """A tensor in memory the renderer reads in place: ``cpu`` (page-aligned host memory),
    ``cuda`` (Vulkan-allocated VRAM imported into CUDA) or ``mps`` (any MPS tensor)."""
    import torch

    kind = torch.device(device).type
    if kind == "cpu":
        return cpu.empty(shape, dtype)
    if kind == "cuda":
        if discrete.enabled():  # CALIPER_VK_EMULATE=discrete: the emulated discrete GPU
            return discrete.empty(shape, dtype)
        from . import cuda

        return cuda.empty(shape, dtype, device)
    if kind == "mps":  # every MPS tensor's MTLBuffer is imported in place
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        return torch.empty(shape, dtype=dtype or torch.float32, device=device)
    raise ValueError(f"caliper_vk.empty(device={device!r}): use 'cpu', 'cuda' or 'mps'")


__all__ = [
    "CONTRACT_VERSION", "GPU_KINDS", "PATH_DEVICE_COPY", "PATH_HOST", "PATH_STAGING", "PATH_ZERO_COPY",
    "SUPPORTED_DTYPES", "ContractError", "ExternalBuffer", "ExternalMemoryError", "LifetimeError",
    "LiveInput", "NotContiguousError", "TooLargeError", "UnsupportedDtypeError", "check_tensor",
    "check_unchanged", "cpu", "dtype_name", "empty", "export", "import_external", "open_input", "release",
    "storage_fingerprint",
]
