"""The one way in: any tensor → one :class:`LiveInput`, whatever its device.

:func:`open_input` is all the live session calls to read a tensor. It exports
the tensor under the v1 contract (:func:`caliper_vk.exporters.export`), imports
its memory into the renderer's Vulkan device where it can — the CPU tensor's own
pages (``VK_EXT_external_memory_host``), shared CUDA VRAM (opaque fd / Win32),
the MPS tensor's ``MTLBuffer`` — and otherwise stages it, saying why. The
result carries everything the renderer needs and nothing it has to work out:

- ``array`` / ``dtype``: the values in their stored dtype on the host (aliasing
  a CPU tensor's memory; a copy refreshed by :meth:`LiveInput.refresh` for a
  staged GPU tensor), which the view's numpy twin and a staging upload read;
- ``imported``: the engine buffer over the tensor's memory, or None (staged);
- ``path`` and ``reason``: what the status line says;
- ``sync``: the producer's side of the write/read protocol — ``cuda.StreamSync``
  (on torch's stream), ``mps.HostSync`` (host, ``torch.mps.synchronize()`` at every
  write's exit) or ``cpu.HostSync`` (host) — with the timeline semaphore the
  frames wait on and signal.

Torch → numpy happens in one place (:func:`caliper_vk._arrays.host_array`).
"""

from __future__ import annotations

import weakref

from .._arrays import host_array
from ..engine.external import ExternalMemoryError, HostImportError, import_host_pointer
from ..engine.sync import TimelineSemaphore
from . import cpu
from .contract import check_unchanged, storage_fingerprint

PATH_ZERO_COPY = "zero-copy"
PATH_DEVICE_COPY = "on-device copy"
PATH_STAGING = "host staging"
PATH_HOST = "host data"

GPU_KINDS = ("opaque-fd", "opaque-win32", "metal-buffer")


class LiveInput:
    """One attached tensor as the renderer reads it. Made by :func:`open_input`.

    Attributes
    ----------
    tensor
        An alias of the attached tensor (``tensor.detach()``: its storage, shape and dtype), held
        with the storage while the input lives; everything the renderer keeps holds this alias.
    ref : weakref.ref
        The tensor the user attached, held weakly: when nothing but Caliper could reach it any
        more (``optimizer.zero_grad()`` set the ``.grad`` it was to None; a module assigned a new
        tensor to the attribute), ``ref()`` is None and the panel says it is no longer updated.
    record : ExternalBuffer
        Its contract record.
    array, dtype
        The values on the host in their stored dtype (bfloat16 as raw uint16 bits).
    imported : engine buffer or None
        The tensor's memory imported into Vulkan; None when staged. The view's
        source owns it from ``set_source`` on (closing the view frees it).
    path, reason : str
        ``zero-copy`` / ``on-device copy`` / ``host staging``, and why.
    sync : object or None
        The producer-side sync and its ``timeline`` (None when opened with ``sync=False``).
    """

    def __init__(self, tensor, record, array, dtype: str, imported, path: str, reason: str, sync,
                 original=None):
        self.tensor, self.record = tensor, record
        self.ref = _weak(tensor if original is None else original)
        self.array, self.dtype, self.imported = array, dtype, imported
        self.path, self.reason, self.sync = path, reason, sync
        self.fingerprint = storage_fingerprint(tensor)
        # a staged tensor that is not on the host is copied to it at every frame
        self.copies = imported is None and tensor.device.type != "cpu"

    def replaced(self) -> bool:
        """True when the tensor's storage was resized, swapped (``set_()``) or reshaped."""
        t = self.ref()
        return t is not None and storage_fingerprint(t) != self.fingerprint

    def refresh(self, name: str = "tensor") -> bool:
        """Per frame, before the read: raise ``LifetimeError`` if the storage was replaced
        (the import would read the old one); copy a staged GPU tensor to the host.
        Returns True when :attr:`array` is a new array."""
        t = self.ref()
        if t is not None:
            check_unchanged(t, self.fingerprint, name)
        if not self.copies:
            return False
        self.array, _ = host_array(self.tensor)
        return True

    def close(self) -> None:
        """Close the sync (CUDA's import of the semaphore first, then the semaphore) and let
        the tensor go. The import is the view's source's to close."""
        if self.sync is not None:
            sync, self.sync = self.sync, None
            sync.close()
        self.tensor = None


def _weak(tensor):
    """A weak reference to ``tensor``, or a strong one (a callable returning it) for an object
    that takes no weak references."""
    try:
        return weakref.ref(tensor)
    except TypeError:
        return lambda: tensor


def _import(device, record, zero_copy: bool, host_reason: str | None):
    """(imported buffer or None, path, reason) for ``record`` on ``device``."""
    from . import import_external

    if host_reason:
        return None, PATH_STAGING, host_reason  # the view draws a host-computed transform
    if record.kind != "staging" and not zero_copy:
        return None, PATH_STAGING, "zero_copy=False was requested"
    try:
        if record.kind == "host-pointer":
            imported = import_host_pointer(device, record.handle, record.nbytes, keepalive=record.owner)
            return imported, PATH_ZERO_COPY, record.reason
        if record.kind in GPU_KINDS:
            imported = import_external(device, record)
            return imported, PATH_DEVICE_COPY if record.mirrored else PATH_ZERO_COPY, record.reason
    except (HostImportError, ExternalMemoryError) as exc:
        return None, PATH_STAGING, f"the driver refused the import: {exc}"
    return None, PATH_STAGING, record.reason


def open_input(tensor, device, name: str = "tensor", *, zero_copy: bool = True,
               host_reason: str | None = None, gpu: bool = True, sync: bool = True, track=None) -> LiveInput:
    """The live input of ``tensor`` on the renderer's ``device`` (an ``engine.Device``).

    Parameters
    ----------
    zero_copy : bool
        False stages the tensor even where it could be imported (comparisons, debugging).
    host_reason : str, optional
        The view reads a host-computed transform of the tensor, not its memory: staged, and
        this is the reason the status line gives.
    gpu : bool
        False stages GPU tensors (one semaphore orders one tensor's writes, so GPU interop
        serves single-input panels).
    sync : bool
        False: no producer-side sync (a further input of a panel whose first input orders
        every write).
    track : tensor, optional
        The tensor whose reachability says whether anything can still write the input (default:
        ``tensor`` itself; a view made for the import, such as ``labels.reshape(-1)``, gives the
        user's tensor here).

    Contract violations raise (``ContractError`` and its kinds, ``cuda.DeviceMismatchError``);
    anything that only rules out interop stages the tensor and says why.
    """
    from . import export, release

    # Caliper holds an alias (same storage, its own tensor object) and the user's tensor only
    # weakly, so a tensor nobody else can reach any more is seen as such (LiveInput.ref)
    original = tensor if track is None else track
    tensor = tensor.detach() if hasattr(tensor, "detach") else tensor
    record = export(tensor, device.info, name, device=device if gpu else None)
    try:
        array, dtype = host_array(tensor)
        imported, path, reason = _import(device, record, zero_copy, host_reason)
    except BaseException:
        release(record)
        raise
    producer = None
    if imported is None:
        release(record)  # staged: free its unused handle and GPU sync
    else:
        # the exporter's own sync (on torch's stream, or MPS's host sync); host memory has none
        producer, record.semaphore = record.semaphore, None  # the live input owns it now
        if producer is not None and not sync:
            producer.close()
            producer = None
    if producer is None and sync:
        producer = cpu.HostSync(TimelineSemaphore(device))
    return LiveInput(tensor, record, array, dtype, imported, path, reason, producer, original=original)
