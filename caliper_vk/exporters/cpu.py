"""CPU tensors: import the tensor's own pages, or stage a copy.

``VK_EXT_external_memory_host`` lets the renderer read a CPU tensor's memory
in place (the pages holding it, rounded out to the driver's alignment). That
is always the path for tensors from :func:`caliper_vk.empty` (page-aligned,
allocated for this) and, for other CPU tensors, whenever the driver has the
extension and accepts the memory; otherwise the session copies the bytes into
a staging buffer every frame and the record says why.
"""

from __future__ import annotations

import mmap
import weakref

import numpy as np

from .contract import ExternalBuffer, check_tensor, dtype_name

# empty() aligns to the largest host-import alignment of the device classes Caliper runs on
# (16 KiB: MoltenVK reports Apple Silicon's page size as minImportedHostPointerAlignment; the
# `apple` device profile too), so an import covers its own allocation and nothing more.
PAGE = max(16384, mmap.PAGESIZE)
# storage data pointer -> the numpy buffer that owns it, for tensors from empty()
_shared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class _Pages(np.ndarray):
    """A page-aligned byte buffer (a subclass so it can be weakly referenced)."""


def empty(shape, dtype=None):
    """A CPU tensor in page-aligned memory the renderer imports in place."""
    import torch

    dtype = dtype or torch.float32
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    itemsize = torch.empty((), dtype=dtype).element_size()
    nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
    padded = max(PAGE, -(-nbytes // PAGE) * PAGE)
    raw = np.zeros(padded + PAGE, np.uint8)
    start = (-raw.ctypes.data) % PAGE
    pages = raw[start : start + padded].view(_Pages)
    t = torch.from_numpy(pages[:nbytes] if nbytes else pages[:0]).view(dtype).reshape(shape)
    check_tensor(t, "caliper_vk.empty()")
    _shared[t.untyped_storage().data_ptr()] = pages
    return t


def is_shared(tensor) -> bool:
    """True for tensors (or contiguous views of them) allocated by :func:`empty`."""
    return tensor.untyped_storage().data_ptr() in _shared


def export(tensor, device_info, name: str = "tensor") -> ExternalBuffer:
    """The record for a CPU tensor: ``host-pointer`` when importable, else ``staging``."""
    check_tensor(tensor, name, device_info.max_storage_buffer_range)
    nbytes = tensor.numel() * tensor.element_size()
    common = dict(offset=0, nbytes=nbytes, dtype=dtype_name(tensor), shape=tuple(tensor.shape),
                  owner=(tensor, tensor.untyped_storage()))
    if nbytes == 0:
        return ExternalBuffer(kind="staging", handle=None, reason="the tensor is empty", **common)
    if not device_info.has("VK_EXT_external_memory_host"):
        return ExternalBuffer(kind="staging", handle=None,
                              reason=f"{device_info.name} lacks VK_EXT_external_memory_host", **common)
    source = "caliper_vk.empty() memory" if is_shared(tensor) else "the tensor's own pages"
    return ExternalBuffer(kind="host-pointer", handle=tensor.data_ptr(),
                          reason=f"host-pointer import of {source}", **common)


class HostSync:
    """The producer's side of the protocol on the host: tensors whose writes are complete when
    the producer's code returns (CPU tensors, and any tensor the session stages).

    Same interface as ``cuda.StreamSync`` and ``mps.HostSync``: ``timeline`` (the engine
    ``TimelineSemaphore`` frames wait on and signal), ``before_write(v)`` (wait until every
    earlier value, i.e. every frame still reading, has finished), ``after_write(read_v, v)``
    (signal ``v``: the write is complete) and ``close()``.
    """

    host_sync = True
    # A write is complete when the producer's code returns (also one made without writing()):
    # a frame with no write since the last one waits for the latest value handed out instead
    # of signalling a fresh one first (caliper_vk.live.protocol: one host signal less a frame).
    complete_on_return = True

    def __init__(self, timeline):
        self.timeline = timeline

    def before_write(self, value: int) -> None:
        self.timeline.wait(value)

    def after_write(self, read_value: int, value: int) -> None:
        self.timeline.signal(value)

    def close(self) -> None:
        self.timeline.close()
