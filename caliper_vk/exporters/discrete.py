"""An emulated discrete GPU, for tests and CI on machines without one.

On a discrete GPU a tensor lives in device memory: the renderer reads it through its import,
and anything the host sees of it (``.cpu()``, ``.item()``, ``.tolist()``, ``host_array``) is a
copy taken at that moment, paid for by a device-to-host transfer that usually blocks the host
until the device's queued work is done. On a CPU-only machine, with the CPU build of torch,
CUDA tensors do not exist, and a stand-in that keeps its values in ordinary host memory lets
code read them in place by accident: a view computing its fit or value range from such a
"host view" follows training here and never on a real GPU. This module closes that gap.

The device
----------
:class:`DeviceTensor` is a torch tensor that reports ``device`` ``cuda:0`` and whose host
views are snapshots, never aliases:

- ``.cpu()``, ``.to("cpu")`` (so :func:`caliper_vk._arrays.host_array`), ``.tolist()``,
  ``.item()``, ``float(t)`` / ``int(t)`` / ``bool(t)`` and printing copy the values as they
  are at that moment, each counted as one device-to-host transfer (``.to("cpu",
  non_blocking=True)`` counts as an asynchronous one, any other as blocking);
- ``.numpy()`` and ``np.asarray(t)`` raise ``TypeError`` with torch's own message, as they do
  for a CUDA tensor;
- ``.cuda()`` returns the tensor itself; every other operation is torch's, on the tensor's
  memory, and gives a :class:`DeviceTensor`.

:class:`EmulatedTensor` (made by :func:`empty` and :func:`to_device`) is a :class:`DeviceTensor`
whose memory is page-aligned so that the renderer imports it in place
(``VK_EXT_external_memory_host``): the training code's writes land in exactly the memory Vulkan
reads, as with ``caliper_vk.empty(device="cuda")`` on NVIDIA, and that memory is reachable from
the host only through a snapshot. :func:`export` is its exporter (``caliper_vk.exporters.export``
dispatches to it): a zero-copy import, ordered by :class:`StreamSync`, whose waits and signals
count as asynchronous (stream-ordered) synchronisations. A device without host import, or a
panel that reads several tensors (GPU interop serves single-input panels), stages the tensor as
it would a CUDA tensor, copying it to the host every frame, and each copy is counted.

``tests/checked_cuda.py``'s CUDA stand-in goes through the real CUDA exporter against a checked
driver; it is a :class:`DeviceTensor` too, with the same host-view semantics.

Turning it on
-------------
``CALIPER_VK_EMULATE=discrete`` makes ``caliper_vk.empty(shape, device="cuda")`` return an
:class:`EmulatedTensor` and installs :func:`emulate` for the whole process (read when
``caliper_vk.exporters`` is first imported). Tests use the module directly: :func:`empty`,
:func:`to_device` and :func:`transfers` need no environment, and ``with emulate():`` stands
in for ``torch.cuda`` (:func:`synchronize` is a blocking synchronisation; ``Event.record``
and ``Stream.wait_event`` asynchronous ones; ``Event.synchronize`` blocking).

The counting seam
-----------------
::

    from caliper_vk.exporters import discrete

    x = discrete.to_device(torch.zeros(8))
    with discrete.transfers() as t:
        total = x.sum().item()     # one blocking device-to-host transfer
    assert t.to_host == 1 and t.blocking == 1 and t.asynchronous == 0

:class:`Transfers` keeps every :class:`Event` recorded while it was open, on any thread
(``Event.thread`` says which): ``to_host`` counts device-to-host transfers, ``nbytes`` their
bytes, ``blocking`` and ``asynchronous`` every transfer and synchronisation by whether the
host waits for the device, and ``syncs`` the synchronisations alone. Counters nest.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

import numpy as np

from .contract import ExternalBuffer, check_tensor, dtype_name

EMULATE_ENV = "CALIPER_VK_EMULATE"
NUMPY_REFUSAL = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                 "tensor to host memory first.")


# -- the counting seam ------------------------------------------------------------------------

@dataclass(frozen=True)
class Event:
    """One device-to-host transfer (``kind="to_host"``) or synchronisation (``kind="sync"``)."""

    kind: str
    what: str  # the call: ".cpu()", ".item()", "torch.cuda.synchronize()", "stream wait" ...
    nbytes: int
    blocking: bool
    thread: str


class Transfers:
    """What crossed from the device to the host while the counter was open (:func:`transfers`)."""

    def __init__(self):
        self.events: list[Event] = []

    @property
    def to_host(self) -> int:
        """Device-to-host transfers."""
        return sum(e.kind == "to_host" for e in self.events)

    @property
    def nbytes(self) -> int:
        """Bytes of the device-to-host transfers."""
        return sum(e.nbytes for e in self.events if e.kind == "to_host")

    @property
    def blocking(self) -> int:
        """Transfers and synchronisations the host waited for."""
        return sum(e.blocking for e in self.events)

    @property
    def asynchronous(self) -> int:
        """Transfers and synchronisations ordered on the device's stream (no host wait)."""
        return sum(not e.blocking for e in self.events)

    @property
    def syncs(self) -> list[Event]:
        """The synchronisations alone."""
        return [e for e in self.events if e.kind == "sync"]

    def __repr__(self) -> str:
        return (f"Transfers(to_host={self.to_host}, nbytes={self.nbytes}, blocking={self.blocking}, "
                f"asynchronous={self.asynchronous}: {[e.what for e in self.events]})")


_counters: list[Transfers] = []
_lock = threading.Lock()


@contextlib.contextmanager
def transfers():
    """Count every device-to-host transfer and synchronisation made inside the block."""
    counter = Transfers()
    with _lock:
        _counters.append(counter)
    try:
        yield counter
    finally:
        with _lock:
            _counters.remove(counter)


def record(kind: str, what: str, nbytes: int = 0, blocking: bool = True) -> None:
    """Record one transfer or synchronisation in every open counter (the emulation calls this)."""
    event = Event(kind, what, int(nbytes), bool(blocking), threading.current_thread().name)
    with _lock:
        for counter in _counters:
            counter.events.append(event)


# -- the device's tensors ---------------------------------------------------------------------

def _torch():
    import torch

    return torch


_VALUE_READS = {"item", "tolist", "__float__", "__int__", "__bool__", "__index__", "__complex__",
                "__repr__", "__format__"}


class DeviceTensor(_torch().Tensor):
    """A tensor in (emulated) device memory: ``device`` is ``cuda:0``; host views are counted
    snapshots (see the module docstring)."""

    @property
    def device(self):
        return _torch().device("cuda", 0)

    @property
    def is_cuda(self) -> bool:
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        torch = _torch()
        name = getattr(func, "__name__", "")
        if name in ("numpy", "__array__"):
            raise TypeError(NUMPY_REFUSAL)
        if name == "cuda" and args and isinstance(args[0], DeviceTensor):
            return args[0]  # on the device already (torch returns the tensor itself)
        if name in ("cpu", "to") and args and isinstance(args[0], DeviceTensor):
            host, blocking = _host_copy(name, args, kwargs)
            if host is not None:
                record("to_host", f".{name}()", host.numel() * host.element_size(), blocking)
                return host
        if name in _VALUE_READS and args and isinstance(args[0], DeviceTensor):
            with torch._C.DisableTorchFunctionSubclass():
                plain = args[0].as_subclass(torch.Tensor)
                record("to_host", f".{name.strip('_')}()", plain.numel() * plain.element_size())
                return func(plain, *args[1:], **kwargs)
        return super().__torch_function__(func, types, args, kwargs)


def _host_copy(name: str, args, kwargs):
    """(a plain CPU tensor copied from ``args[0]``, blocking) when ``.cpu()``/``.to(...)`` goes
    to the host; (None, _) when ``.to`` stays on the device."""
    torch = _torch()
    non_blocking = bool(kwargs.get("non_blocking", False))
    dtype = None
    if name == "to":
        device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
        if device is None or torch.device(device).type != "cpu":
            return None, False
    with torch._C.DisableTorchFunctionSubclass():
        plain = args[0].as_subclass(torch.Tensor)
        copy = plain.clone(memory_format=torch.contiguous_format)
        if dtype is not None:
            copy = copy.to(dtype)
    return copy, not non_blocking


class EmulatedTensor(DeviceTensor):
    """A :class:`DeviceTensor` in page-aligned memory that the renderer imports in place."""


def empty(shape, dtype=None) -> EmulatedTensor:
    """An emulated device tensor the renderer reads in place (``caliper_vk.empty(device="cuda")``
    under ``CALIPER_VK_EMULATE=discrete``); zero-filled."""
    from . import cpu

    return cpu.empty(shape, dtype).as_subclass(EmulatedTensor)


def to_device(values, dtype=None) -> EmulatedTensor:
    """A copy of ``values`` on the emulated device (``tensor.cuda()``); no transfer is counted."""
    torch = _torch()
    src = torch.as_tensor(np.asarray(values) if not isinstance(values, torch.Tensor) else values)
    if isinstance(src, DeviceTensor):
        with torch._C.DisableTorchFunctionSubclass():
            src = src.as_subclass(torch.Tensor)
    t = empty(tuple(src.shape), dtype or src.dtype)
    with torch._C.DisableTorchFunctionSubclass():
        t.as_subclass(torch.Tensor).copy_(src)
    return t


def is_emulated(tensor) -> bool:
    """True for the tensors :func:`export` serves."""
    return isinstance(tensor, EmulatedTensor)


# -- the exporter -----------------------------------------------------------------------------

class StreamSync:
    """The producer side of the protocol for an emulated device tensor. The emulated stream is
    the calling thread (its kernels are done when torch returns), so waits and signals are the
    host's; on the hardware they are stream-ordered, and are counted as asynchronous."""

    host_sync = False

    def __init__(self, timeline):
        self.timeline = timeline

    def before_write(self, value: int) -> None:
        record("sync", "stream wait", blocking=False)
        self.timeline.wait(value)

    def after_write(self, read_value: int, value: int) -> None:
        record("sync", "stream signal", blocking=False)
        self.timeline.signal(value)

    def close(self) -> None:
        self.timeline.close()


def export(tensor, device_info, name: str = "tensor", device=None) -> ExternalBuffer:
    """The record of an emulated device tensor: its memory imported in place (``host-pointer``
    under the hood, reported as zero-copy device memory), or staged as a CUDA tensor would be."""
    from ..engine.sync import TimelineSemaphore

    check_tensor(tensor, name, device_info.max_storage_buffer_range)
    nbytes = tensor.numel() * tensor.element_size()
    common = dict(offset=0, nbytes=nbytes, dtype=dtype_name(tensor), shape=tuple(tensor.shape),
                  owner=(tensor, tensor.untyped_storage()))
    why = None
    if nbytes == 0:
        why = "the tensor is empty"
    elif device is None:
        why = "emulated discrete device: no Vulkan device was given for its interop"
    elif not device_info.has("VK_EXT_external_memory_host"):
        why = (f"emulated discrete device: {device_info.name} lacks VK_EXT_external_memory_host, "
               "which the emulation imports device memory with")
    if why is not None:
        return ExternalBuffer(kind="staging", handle=None,
                              reason=f"{why}: the tensor is copied to the host every frame", **common)
    record_ = ExternalBuffer(kind="host-pointer", handle=tensor.data_ptr(),
                             reason="emulated discrete device memory, imported in place; sync on its stream",
                             **common)
    record_.semaphore = StreamSync(TimelineSemaphore(device))
    return record_


# -- torch.cuda, emulated ---------------------------------------------------------------------

def synchronize(device=None) -> None:
    """``torch.cuda.synchronize``: the host waits for the device (blocking)."""
    record("sync", "torch.cuda.synchronize()")


class CudaEvent:
    """``torch.cuda.Event``: ``record`` and a stream's ``wait_event`` are asynchronous,
    ``synchronize`` blocks the host."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.recorded = False

    def record(self, stream=None) -> None:
        record("sync", "Event.record()", blocking=False)
        self.recorded = True

    def synchronize(self) -> None:
        record("sync", "Event.synchronize()")

    def query(self) -> bool:
        return True  # the emulated stream is always done

    def wait(self, stream=None) -> None:
        record("sync", "Event.wait()", blocking=False)


class CudaStream:
    """``torch.cuda.current_stream()`` of the emulated device."""

    cuda_stream = 0

    def synchronize(self) -> None:
        record("sync", "Stream.synchronize()")

    def wait_event(self, event) -> None:
        record("sync", "Stream.wait_event()", blocking=False)

    def wait_stream(self, stream) -> None:
        record("sync", "Stream.wait_stream()", blocking=False)

    def record_event(self, event=None):
        event = event or CudaEvent()
        event.record(self)
        return event


_STREAM = CudaStream()
_PATCHES = {"synchronize": synchronize, "Event": CudaEvent, "current_stream": lambda device=None: _STREAM,
            "current_device": lambda: 0, "memory_allocated": lambda device=None: 0,
            "device": lambda device=None: contextlib.nullcontext()}


@contextlib.contextmanager
def emulate():
    """Inside the block, ``torch.cuda``'s stream, event and synchronisation calls act on the
    emulated device (and are counted); ``torch.cuda.is_available()`` is left alone."""
    cuda = _torch().cuda
    saved = {k: getattr(cuda, k) for k in _PATCHES}
    for k, v in _PATCHES.items():
        setattr(cuda, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(cuda, k, v)


def enabled() -> bool:
    """True when ``CALIPER_VK_EMULATE=discrete`` is set; any other value is refused."""
    value = os.environ.get(EMULATE_ENV, "").strip().lower()
    if value not in ("", "discrete"):
        raise ValueError(f"{EMULATE_ENV}={value!r}: the one emulated device is 'discrete' (or unset it)")
    return value == "discrete"


def install() -> None:
    """Turn :func:`emulate` on for the rest of the process (``CALIPER_VK_EMULATE=discrete``)."""
    global _installed
    if not _installed:
        _installed = emulate()
        _installed.__enter__()


_installed = None

__all__ = ["EMULATE_ENV", "CudaEvent", "CudaStream", "DeviceTensor", "EmulatedTensor", "Event", "StreamSync",
           "Transfers", "empty", "emulate", "enabled", "export", "install", "is_emulated", "record",
           "synchronize", "to_device", "transfers"]
