"""Torch tensor → importable handle, under the v1 contract (docs/contract.md).

:func:`export` picks the exporter for the tensor's device. CPU tensors are
imported in place where the driver allows (:mod:`.cpu`). CUDA and MPS tensors
are drawn through host staging until their interop exporters exist; the
record says so, so the status line can.
"""

from __future__ import annotations

from . import cpu
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


def export(tensor, device_info, name: str = "tensor") -> ExternalBuffer:
    """An :class:`ExternalBuffer` for ``tensor`` on the renderer's device."""
    check_tensor(tensor, name, device_info.max_storage_buffer_range)
    kind = tensor.device.type
    if kind == "cpu":
        return cpu.export(tensor, device_info, name)
    why = {
        "cuda": "CUDA interop is not built yet: the tensor is copied to the host every frame",
        "mps": "Metal interop is not built yet: the tensor is copied to the host every frame",
    }.get(kind, f"no exporter for {kind} tensors: the tensor is copied to the host every frame")
    return ExternalBuffer(kind="staging", handle=None, offset=0,
                          nbytes=tensor.numel() * tensor.element_size(), dtype=dtype_name(tensor),
                          shape=tuple(tensor.shape), owner=(tensor, tensor.untyped_storage()),
                          reason=why)


__all__ = [
    "CONTRACT_VERSION", "SUPPORTED_DTYPES", "ContractError", "ExternalBuffer", "LifetimeError",
    "NotContiguousError", "TooLargeError", "UnsupportedDtypeError", "check_tensor",
    "check_unchanged", "cpu", "dtype_name", "export", "storage_fingerprint",
]
