"""A CUDA driver for machines without one, built on the real cuda-bindings.

:class:`CheckedDriver` is the real ``cuda.bindings.driver`` module — its structs, enums,
handle classes, constants and ``CUresult`` — with only the ``cu*`` entry points the
exporter calls intercepted. Each interception

1. checks the arguments against the entry point's real signature: the count, every
   handle, struct and enum of the exact real class (a ``CUdevice`` where a ``CUcontext``
   belongs fails; so does a swapped pair), plain ints where the C API takes integers;
2. hands the arguments to the real binding too, which converts them exactly as it would
   for the driver and then fails only to find ``libcuda`` (so a struct of the wrong type,
   a list where a struct belongs, a short list: the binding's own error);
3. checks the state a real driver checks (a live handle, a current context, the handle
   type the struct names, an open fd) and returns the real binding's result types.

Behind it is a small "GPU" that makes the calls do what they do on hardware, on the
Vulkan test device (lavapipe): imported memory is mapped from the very fd Vulkan
exported (lavapipe's memfd; its allocations start ``offset`` bytes in, after Mesa's
``{size, offset}`` header), so what "CUDA" writes, Vulkan reads; VMM allocations are
backed by exportable lavapipe memory mapped at the reserved address; the stream is the
calling thread, so waits block it (with a deadline: a deadlock fails, never hangs) and
signals are host signals of the shared timeline, which must only grow.

lavapipe (Mesa 22.3) has no ``VK_KHR_external_semaphore_fd``: :meth:`timeline` makes a
plain timeline whose ``vkGetSemaphoreFdKHR`` is answered here with an fd this driver
resolves back to it (:meth:`semaphore_fd_getter`; the engine's own ``export_handle``
code runs). Torch here is a CPU build: :func:`as_cuda_tensor` stands in for
``torch.as_tensor(__cuda_array_interface__)`` with a CPU tensor over the mapped bytes
that reports ``device`` ``cuda:0`` (:class:`CudaStandIn`), built on the emulated discrete
GPU's :class:`~caliper_vk.exporters.discrete.DeviceTensor`: its host views (``.cpu()``,
``host_array``, ``.item()``) are counted snapshots and ``.numpy()`` refuses, as for a real
CUDA tensor, so a twin or a parameter taken from a stale host copy fails here too.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import os
import threading

import numpy as np
import pytest
import torch

from caliper_vk.exporters.discrete import DeviceTensor

# cuda-bindings has no macOS wheel (requirements-dev.txt marks it off there): the tests that use
# this stand-in skip, and say why, where it is not installed
real = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed (no macOS wheels)")

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
PROT_NONE, PROT_RW = 0, 3
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 1, 2, 0x10, 0x20, 0x4000
GRANULARITY = 1 << 16
WAIT_DEADLINE_NS = 5_000_000_000


class ArgumentError(AssertionError):
    """A driver call whose arguments do not fit the real bindings or the driver's rules."""


def driver_installed() -> bool:
    """True when a real libcuda answers (then the real functions must not be called with fakes)."""
    try:
        real.cuDriverGetVersion()
    except RuntimeError as exc:
        if type(exc).__name__ == "DynamicLibNotFoundError":
            return False
        raise
    return True


class _FailError(Exception):
    """A driver error result (what the real driver returns for this state)."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


class ListOf:
    def __init__(self, cls):
        self.cls = cls

    def __repr__(self):
        return f"list[{self.cls.__name__}]"


D = real
SIGNATURES = {  # the C API's parameters, as the real bindings type them
    "cuInit": (int,),
    "cuDeviceGet": (int,),
    "cuDevicePrimaryCtxRetain": (D.CUdevice,),
    "cuDeviceGetUuid": (D.CUdevice,),
    "cuCtxPushCurrent": (D.CUcontext,),
    "cuCtxPopCurrent": (),
    "cuCtxSynchronize": (),
    "cuImportExternalMemory": (D.CUDA_EXTERNAL_MEMORY_HANDLE_DESC,),
    "cuExternalMemoryGetMappedBuffer": (D.CUexternalMemory, D.CUDA_EXTERNAL_MEMORY_BUFFER_DESC),
    "cuMemFree": (D.CUdeviceptr,),
    "cuDestroyExternalMemory": (D.CUexternalMemory,),
    "cuImportExternalSemaphore": (D.CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC,),
    "cuWaitExternalSemaphoresAsync": (ListOf(D.CUexternalSemaphore),
                                      ListOf(D.CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS), int, D.CUstream),
    "cuSignalExternalSemaphoresAsync": (ListOf(D.CUexternalSemaphore),
                                        ListOf(D.CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS), int, D.CUstream),
    "cuDestroyExternalSemaphore": (D.CUexternalSemaphore,),
    "cuStreamQuery": (D.CUstream,),
    "cuStreamIsCapturing": (D.CUstream,),
    "cuStreamCreate": (int,),
    "cuStreamDestroy": (D.CUstream,),
    "cuMemGetAllocationGranularity": (D.CUmemAllocationProp, D.CUmemAllocationGranularity_flags),
    "cuMemCreate": (int, D.CUmemAllocationProp, int),
    "cuMemAddressReserve": (int, int, int, int),
    "cuMemMap": (D.CUdeviceptr, int, int, D.CUmemGenericAllocationHandle, int),
    "cuMemSetAccess": (D.CUdeviceptr, int, ListOf(D.CUmemAccessDesc), int),
    "cuMemExportToShareableHandle": (D.CUmemGenericAllocationHandle, D.CUmemAllocationHandleType, int),
    "cuMemUnmap": (D.CUdeviceptr, int),
    "cuMemAddressFree": (D.CUdeviceptr, int),
    "cuMemRelease": (D.CUmemGenericAllocationHandle,),
}
NO_CONTEXT_NEEDED = {"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuDeviceGetUuid",
                     "cuCtxPushCurrent", "cuMemGetAllocationGranularity"}
OK = D.CUresult.CUDA_SUCCESS


def _fits(value, spec) -> bool:
    if spec is int:
        return type(value) is int  # not bool, not a handle object, not a float
    if isinstance(spec, ListOf):
        return isinstance(value, (list, tuple)) and all(type(v) is spec.cls for v in value)
    return type(value) is spec


def _name(value) -> str:
    return type(value).__name__ if not isinstance(value, (list, tuple)) else \
        f"{type(value).__name__}[{', '.join(type(v).__name__ for v in value)}]"


def _uuid(data: bytes):
    """A real ``CUuuid`` holding ``data`` (its ``bytes`` is read-only: built over memory)."""
    buf = ctypes.create_string_buffer(bytes(data), 16)
    _KEEP.append(buf)  # the struct reads this memory for as long as the process lives
    return D.CUuuid(_ptr=ctypes.addressof(buf))


_KEEP: list = []


def mesa_layout(fd: int) -> tuple[int, int]:
    """(file size, data offset) of a lavapipe memory fd (Mesa's os_malloc_aligned_fd header)."""
    header = os.pread(fd, 16, 0)
    total, offset = int.from_bytes(header[:8], "little"), int.from_bytes(header[8:], "little")
    if total != os.fstat(fd).st_size or offset % 4096:
        raise ArgumentError(f"fd {fd} is not lavapipe exportable memory (header {header.hex()})")
    return total, offset


class CheckedDriver:
    """The real ``cuda.bindings.driver`` with its ``cu*`` entry points intercepted (see above).

    ``vk_device`` is the Vulkan device this one CUDA device (ordinal 0) shares a GPU with;
    ``uuid`` overrides the UUID it reports (another GPU); ``fail`` maps an entry point to
    the ``CUresult`` it returns instead of working; ``stream`` is the handle torch's
    current stream has.
    """

    def __init__(self, vk_device, uuid: bytes | None = None, fail: dict | None = None, stream: int = 0x5EED,
                 gpus: list | None = None):
        self.vk_device = vk_device
        self.uuid = bytes(uuid if uuid is not None else vk_device.info.device_uuid)
        # more GPUs (their UUIDs, by physical ordinal; the first is the one above): the driver's
        # ordinals are those CUDA_VISIBLE_DEVICES leaves, in its order; only the first has a context
        self.gpus = [self.uuid, *(bytes(g) for g in gpus or [])]
        self.fail = dict(fail or {})
        self.stream = stream
        self.capturing = False  # torch's stream is capturing a CUDA graph
        self.streams: set[int] = set()  # streams made with cuStreamCreate (and not destroyed)
        self.log: list[tuple] = []
        self.check_real = not driver_installed()
        self._ids = itertools.count(0x7F000000, 0x100)
        self._lock = threading.Lock()
        self.contexts: dict[int, list] = {}  # thread id -> stack of current contexts
        self.memories: dict[int, dict] = {}  # CUexternalMemory -> state
        self.mappings: dict[int, tuple] = {}  # mapped pointer -> (ext, base, total)
        self.semaphores: dict[int, dict] = {}  # CUexternalSemaphore -> state
        self.allocations: dict[int, dict] = {}  # CUmemGenericAllocationHandle -> state
        self.reservations: dict[int, dict] = {}  # reserved address -> state
        self._timelines: dict[int, tuple] = {}  # VkSemaphore handle -> (token fd, timeline)
        self._tokens: dict[tuple, object] = {}  # (st_dev, st_ino) of a token -> timeline

    # -- the real module, except the entry points ---------------------------------------------
    def __getattr__(self, name):
        if name.startswith("cu") and name[2:3].isupper():
            if name not in SIGNATURES:
                raise AttributeError(f"{name} is not intercepted: a new driver call needs a checked stand-in")
            return lambda *args: self._call(name, args)
        return getattr(real, name)

    def _call(self, name: str, args: tuple):
        spec = SIGNATURES[name]
        if len(args) != len(spec):
            raise ArgumentError(f"{name} takes {len(spec)} arguments ({', '.join(map(repr, spec))}), "
                                f"got {len(args)}")
        for i, (value, want) in enumerate(zip(args, spec, strict=True)):
            if not _fits(value, want):
                raise ArgumentError(f"{name} argument {i + 1} must be {want!r} "
                                    f"({getattr(want, '__name__', want)}), got {_name(value)}")
        if self.check_real:
            # No collection inside the real binding: a weakref finalizer run there by the garbage
            # collector (exporters/cuda.py: _release_shared) calls the binding again while its
            # lazy loader holds its lock, and the suite hung when GC timing shifted.
            collecting = gc.isenabled()
            gc.disable()
            try:
                getattr(real, name)(*args)
            except RuntimeError as exc:
                if type(exc).__name__ != "DynamicLibNotFoundError":
                    raise ArgumentError(f"the real {name} rejected the arguments: {exc}") from exc
            except Exception as exc:
                raise ArgumentError(f"the real {name} rejected the arguments: {exc}") from exc
            finally:
                if collecting:
                    gc.enable()
        self.log.append((name, *args))
        if name not in NO_CONTEXT_NEEDED and not self.contexts.get(threading.get_ident()):
            raise ArgumentError(f"{name} was called with no current context (wrap it in Gpu.current())")
        if name in self.fail:
            return (self.fail[name],)
        try:
            with self._lock:
                result = getattr(self, "_" + name)(*args)
        except _FailError as exc:
            return (exc.result,)
        if not isinstance(result, tuple):
            result = (result,)
        return (OK, *result)

    # -- device and context -------------------------------------------------------------------
    def _cuInit(self, flags):
        if flags != 0:
            raise ArgumentError("cuInit flags must be 0")
        return ()

    def visible(self) -> list[int]:
        """The physical ordinals the driver lists, in its order (``CUDA_VISIBLE_DEVICES``)."""
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        if env is None:
            return list(range(len(self.gpus)))
        out = []
        for item in env.split(","):  # the driver stops at the first entry it cannot use
            if not item.strip().isdigit() or int(item) >= len(self.gpus):
                break
            out.append(int(item))
        return out

    def _cuDeviceGet(self, ordinal):
        visible = self.visible()
        if not 0 <= ordinal < len(visible):
            raise _FailError(D.CUresult.CUDA_ERROR_INVALID_DEVICE)
        return D.CUdevice(visible[ordinal])

    def _cuDevicePrimaryCtxRetain(self, dev):
        return D.CUcontext(0xC0000 + int(dev))

    def _cuDeviceGetUuid(self, dev):
        return _uuid(self.gpus[int(dev)])

    def _cuCtxPushCurrent(self, ctx):
        if int(ctx) != 0xC0000:
            raise ArgumentError(f"cuCtxPushCurrent of an unknown context {int(ctx):#x}")
        self.contexts.setdefault(threading.get_ident(), []).append(int(ctx))
        return ()

    def _cuCtxPopCurrent(self):
        return D.CUcontext(self.contexts[threading.get_ident()].pop())

    def _cuCtxSynchronize(self):
        return ()  # the stream is the calling thread: nothing is ever queued

    def balanced(self) -> bool:
        return not any(self.contexts.values())

    # -- external memory ----------------------------------------------------------------------
    def _open_fd(self, name, fd):
        try:
            os.fstat(fd)
        except OSError as exc:
            raise ArgumentError(f"{name}: fd {fd} is not open") from exc

    def _cuImportExternalMemory(self, desc):
        if desc.type == D.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32:
            if not desc.handle.win32.handle or desc.size <= 0:  # NT handles are not ours to map here
                raise ArgumentError("cuImportExternalMemory: a null Win32 handle or no size")
            ext = next(self._ids)
            self.memories[ext] = {"fd": None, "size": int(desc.size)}
            return D.CUexternalMemory(ext)
        if desc.type != D.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD:
            raise ArgumentError(f"cuImportExternalMemory: handle type {desc.type!r} on Linux")
        fd = desc.handle.fd
        self._open_fd("cuImportExternalMemory", fd)
        total, offset = mesa_layout(fd)
        if not 0 < desc.size <= total - offset or desc.flags not in (0, D.CUDA_EXTERNAL_MEMORY_DEDICATED):
            raise ArgumentError(f"cuImportExternalMemory: size {desc.size} / flags {desc.flags} do not fit "
                                f"the exported allocation ({total - offset} bytes)")
        ext = next(self._ids)
        self.memories[ext] = {"fd": fd, "size": int(desc.size), "total": total, "offset": offset}
        return D.CUexternalMemory(ext)  # the fd is the driver's now

    def _cuExternalMemoryGetMappedBuffer(self, ext, desc):
        mem = self.memories.get(int(ext))
        if mem is None:
            raise ArgumentError("cuExternalMemoryGetMappedBuffer of a destroyed or unknown import")
        if desc.flags != 0 or desc.offset + desc.size > mem["size"] or desc.size == 0:
            raise ArgumentError(f"cuExternalMemoryGetMappedBuffer: [{desc.offset}, +{desc.size}) outside "
                                f"the {mem['size']}-byte import")
        base = libc.mmap(None, mem["total"], PROT_RW, MAP_SHARED, mem["fd"], 0)
        if base in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap of the imported memory failed")
        ptr = base + mem["offset"] + int(desc.offset)
        self.mappings[ptr] = (int(ext), base, mem["total"])
        return D.CUdeviceptr(ptr)

    def _cuMemFree(self, ptr):
        entry = self.mappings.pop(int(ptr), None)
        if entry is None:
            raise ArgumentError(f"cuMemFree of {int(ptr):#x}, which no mapping returned")
        libc.munmap(entry[1], entry[2])
        return ()

    def _cuDestroyExternalMemory(self, ext):
        mem = self.memories.pop(int(ext), None)
        if mem is None:
            raise ArgumentError("cuDestroyExternalMemory of a destroyed or unknown import")
        if mem["fd"] is not None:
            os.close(mem["fd"])
        return ()

    # -- external semaphores ------------------------------------------------------------------
    def timeline(self, device, initial: int = 0, export: str | None = None):
        """An engine ``TimelineSemaphore`` that "exports" (see the module docstring)."""
        from caliper_vk.engine.sync import TimelineSemaphore
        from caliper_vk.engine._vk import ffi

        sem = TimelineSemaphore(device, initial)
        sem.export_kind = export
        token = os.memfd_create("caliper-test-timeline")
        st = os.fstat(token)
        self._tokens[(st.st_dev, st.st_ino)] = sem
        self._timelines[int(ffi.cast("uintptr_t", sem.handle))] = (token, sem)
        close = sem.close

        def closing():
            close()
            if token in [t for t, _ in self._timelines.values()]:
                os.close(token)
                self._timelines = {k: v for k, v in self._timelines.items() if v[0] != token}

        sem.close = closing
        return sem

    def semaphore_fd_getter(self, fail=None):
        """What ``vkGetSemaphoreFdKHR`` does for :meth:`timeline` semaphores (``fail``: an exception
        class to raise instead; a fresh instance each time, so no traceback keeps frames alive)."""
        from caliper_vk.engine._vk import ffi

        def get_fd(dev, info):
            if fail is not None:
                raise fail()
            token, _ = self._timelines[int(ffi.cast("uintptr_t", info.semaphore))]
            return os.dup(token)

        return get_fd

    def _cuImportExternalSemaphore(self, desc):
        want = D.CUexternalSemaphoreHandleType.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
        if desc.type != want:
            raise ArgumentError(f"cuImportExternalSemaphore: {desc.type!r}, but the semaphore is a "
                                "Vulkan timeline exported as an opaque fd")
        fd = desc.handle.fd
        self._open_fd("cuImportExternalSemaphore", fd)
        st = os.fstat(fd)
        timeline = self._tokens.get((st.st_dev, st.st_ino))
        if timeline is None:
            raise ArgumentError(f"cuImportExternalSemaphore: fd {fd} is no exported timeline semaphore")
        sem = next(self._ids)
        self.semaphores[sem] = {"fd": fd, "timeline": timeline}
        return D.CUexternalSemaphore(sem)

    def _semaphore_op(self, name, sems, params, count, stream):
        if count != len(sems) or count != len(params) or count < 1:
            raise ArgumentError(f"{name}: numExtSems {count} for {len(sems)} semaphores, {len(params)} params")
        if int(stream) != self.stream and int(stream) not in self.streams:
            raise ArgumentError(f"{name} on stream {int(stream):#x}, not torch's current stream "
                                f"{self.stream:#x} nor one made with cuStreamCreate")
        if self.capturing and int(stream) == self.stream:
            raise ArgumentError(f"{name} queued during CUDA graph capture: its value would be baked "
                                "into the graph")
        out = []
        for sem, p in zip(sems, params, strict=True):
            state = self.semaphores.get(int(sem))
            if state is None:
                raise ArgumentError(f"{name} on a destroyed or unknown semaphore")
            if p.flags != 0:
                raise ArgumentError(f"{name}: flags {p.flags}")
            out.append((state["timeline"], int(p.params.fence.value)))
        return out

    def _cuWaitExternalSemaphoresAsync(self, sems, params, count, stream):
        for timeline, value in self._semaphore_op("cuWaitExternalSemaphoresAsync", sems, params, count, stream):
            self._lock.release()  # the renderer may signal meanwhile
            try:
                if not timeline.wait(value, WAIT_DEADLINE_NS):
                    raise ArgumentError(f"stream deadlock: waited {WAIT_DEADLINE_NS / 1e9:.0f} s for the "
                                        f"timeline to reach {value} (it is at {timeline.value})")
            finally:
                self._lock.acquire()
        return ()

    def _cuSignalExternalSemaphoresAsync(self, sems, params, count, stream):
        for timeline, value in self._semaphore_op("cuSignalExternalSemaphoresAsync", sems, params, count,
                                                  stream):
            if value <= timeline.value:
                raise ArgumentError(f"cuSignalExternalSemaphoresAsync({value}): the timeline is at "
                                    f"{timeline.value}; a timeline value never moves backwards")
            timeline.signal(value)
        return ()

    def _cuDestroyExternalSemaphore(self, sem):
        state = self.semaphores.pop(int(sem), None)
        if state is None:
            raise ArgumentError("cuDestroyExternalSemaphore of a destroyed or unknown semaphore")
        os.close(state["fd"])
        return ()

    # -- streams: each is the calling thread, so queued work is already done ------------------
    def _known_stream(self, name, stream):
        if int(stream) != self.stream and int(stream) not in self.streams:
            raise ArgumentError(f"{name} of an unknown or destroyed stream {int(stream):#x}")

    def _cuStreamQuery(self, stream):
        self._known_stream("cuStreamQuery", stream)
        return ()  # CUDA_SUCCESS: nothing queued is left (a real driver may say NOT_READY)

    def _cuStreamIsCapturing(self, stream):
        self._known_stream("cuStreamIsCapturing", stream)
        capturing = self.capturing and int(stream) == self.stream
        return D.CUstreamCaptureStatus(1 if capturing else 0)

    def _cuStreamCreate(self, flags):
        if flags not in (0, int(D.CUstream_flags.CU_STREAM_NON_BLOCKING)):
            raise ArgumentError(f"cuStreamCreate flags {flags}")
        stream = next(self._ids)
        self.streams.add(stream)
        return D.CUstream(stream)

    def _cuStreamDestroy(self, stream):
        if int(stream) not in self.streams:
            raise ArgumentError("cuStreamDestroy of a stream not made by cuStreamCreate, or destroyed")
        self.streams.discard(int(stream))
        return ()

    def flushes(self) -> int:
        """How many queued semaphore operations were followed by a ``cuStreamQuery`` of their
        stream (what submits them under WDDM)."""
        calls, n = self.calls(), 0
        for before, after in itertools.pairwise(calls):
            n += before.endswith("SemaphoresAsync") and after == "cuStreamQuery"
        return n

    # -- VMM: cuMemCreate memory, backed by exportable lavapipe memory --------------------------
    def _check_prop(self, name, prop):
        if (prop.type != D.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
                or prop.location.type != D.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
                or prop.location.id != 0
                or prop.requestedHandleTypes
                != D.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR):
            raise ArgumentError(f"{name}: allocation properties {prop.type!r}, {prop.location.type!r} "
                                f"{prop.location.id}, {prop.requestedHandleTypes!r}")

    def _cuMemGetAllocationGranularity(self, prop, option):
        self._check_prop("cuMemGetAllocationGranularity", prop)
        return GRANULARITY

    def _cuMemCreate(self, size, prop, flags):
        from caliper_vk.engine.external import ExportableBuffer

        self._check_prop("cuMemCreate", prop)
        if size % GRANULARITY or flags != 0:
            raise ArgumentError(f"cuMemCreate({size}, flags={flags}): size must be a granularity multiple")
        buffer = ExportableBuffer(self.vk_device, size, "opaque-fd")
        fd, _ = buffer.export()
        _, offset = mesa_layout(fd)
        handle = next(self._ids)
        self.allocations[handle] = {"buffer": buffer, "fd": fd, "offset": offset, "size": size}
        return D.CUmemGenericAllocationHandle(handle)

    def _cuMemAddressReserve(self, size, alignment, addr, flags):
        if size % GRANULARITY or addr != 0 or flags != 0:
            raise ArgumentError(f"cuMemAddressReserve({size}, {alignment}, {addr}, {flags})")
        ptr = libc.mmap(None, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        self.reservations[ptr] = {"size": size, "mapped": None, "access": False}
        return D.CUdeviceptr(ptr)

    def _reservation(self, name, ptr, size):
        res = self.reservations.get(int(ptr))
        if res is None or res["size"] != size:
            raise ArgumentError(f"{name}({int(ptr):#x}, {size}): not a reserved range of that size")
        return res

    def _cuMemMap(self, ptr, size, offset, handle, flags):
        res = self._reservation("cuMemMap", ptr, size)
        alloc = self.allocations.get(int(handle))
        if alloc is None or offset != 0 or flags != 0 or res["mapped"] is not None or alloc["size"] < size:
            raise ArgumentError("cuMemMap: unknown allocation, nonzero offset/flags, or already mapped")
        got = libc.mmap(int(ptr), size, PROT_RW, MAP_SHARED | MAP_FIXED, alloc["fd"], alloc["offset"])
        if got != int(ptr):
            raise OSError(ctypes.get_errno(), "mmap MAP_FIXED failed")
        res["mapped"] = int(handle)
        return ()

    def _cuMemSetAccess(self, ptr, size, descs, count):
        res = self._reservation("cuMemSetAccess", ptr, size)
        if count != len(descs) or res["mapped"] is None:
            raise ArgumentError("cuMemSetAccess: count does not match, or the range is not mapped")
        for d in descs:
            if (d.location.type != D.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE or d.location.id != 0
                    or d.flags != D.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE):
                raise ArgumentError(f"cuMemSetAccess: {d.location.type!r} {d.location.id} {d.flags!r}")
        res["access"] = True
        return ()

    def _cuMemExportToShareableHandle(self, handle, kind, flags):
        alloc = self.allocations.get(int(handle))
        if alloc is None or flags != 0:
            raise ArgumentError("cuMemExportToShareableHandle of an unknown allocation")
        if kind != D.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR:
            raise ArgumentError(f"cuMemExportToShareableHandle as {kind!r}, not a POSIX fd")
        fd, _ = alloc["buffer"].export()
        return fd  # an int, as the real binding returns for a POSIX fd

    def _cuMemUnmap(self, ptr, size):
        res = self._reservation("cuMemUnmap", ptr, size)
        if res["mapped"] is None:
            raise ArgumentError("cuMemUnmap of a range that is not mapped")
        libc.mmap(int(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0)
        res["mapped"] = None
        return ()

    def _cuMemAddressFree(self, ptr, size):
        res = self._reservation("cuMemAddressFree", ptr, size)
        if res["mapped"] is not None:
            raise ArgumentError("cuMemAddressFree of a range still mapped (cuMemUnmap first)")
        libc.munmap(int(ptr), size)
        del self.reservations[int(ptr)]
        return ()

    def _cuMemRelease(self, handle):
        alloc = self.allocations.pop(int(handle), None)
        if alloc is None:
            raise ArgumentError("cuMemRelease of an unknown allocation")
        os.close(alloc["fd"])
        alloc["buffer"].close()
        return ()

    # -- what is still held ---------------------------------------------------------------------
    def leaks(self) -> dict:
        return {k: len(v) for k, v in (("memories", self.memories), ("mappings", self.mappings),
                                       ("semaphores", self.semaphores), ("allocations", self.allocations),
                                       ("reservations", self.reservations), ("streams", self.streams)) if v}

    def calls(self) -> list[str]:
        """The entry points called, in order, less the context pushes and pops around them."""
        return [e[0] for e in self.log if e[0] not in ("cuCtxPushCurrent", "cuCtxPopCurrent")]


# -- torch's side: a CPU tensor standing in for a CUDA one -------------------------------------

class CudaStandIn(DeviceTensor):
    """A CPU tensor over mapped "device" memory that reports ``device`` ``cuda:0``: what the
    exporter reads of a CUDA tensor (device, storage and data pointers, shape, dtype). Its host
    views are those of :class:`caliper_vk.exporters.discrete.DeviceTensor`: ``.cpu()``,
    ``host_array`` and ``.item()`` are counted snapshots, ``.numpy()`` refuses, so code that
    reads the "device" memory through a host alias fails here as it would on a GPU."""


# check_tensor accepts torch tensors by their type's module; this subclass stands for one
CudaStandIn.__module__ = "torch.cuda_standin"


class _Pages(np.ndarray):
    """Host pages holding the CUDA array's owner (so the tensor keeps the allocation alive)."""


def as_cuda_tensor(array, index: int):
    """Stand-in for ``torch.as_tensor(array, device=f"cuda:{index}")`` over mapped memory."""
    iface = array.__cuda_array_interface__
    (ptr, read_only), (nbytes,) = iface["data"], iface["shape"]
    assert iface["typestr"] == "|u1" and not read_only and index == 0
    pages = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr)).view(_Pages)
    pages.owner = array
    return torch.Tensor._make_subclass(CudaStandIn, torch.from_numpy(pages))


def stand_in(values):
    """A CUDA stand-in tensor holding a copy of ``values`` (not from caliper_vk.empty)."""
    t = torch.as_tensor(values).clone()
    return torch.Tensor._make_subclass(CudaStandIn, t)


def install(monkeypatch, drv: CheckedDriver, device, semaphore_fail=None) -> CheckedDriver:
    """Route the exporter's driver, stream, tensor and semaphore-export seams to ``drv``."""
    from caliper_vk.engine import sync as sync_mod
    from caliper_vk.exporters import cuda, cuda_driver

    monkeypatch.setattr(cuda_driver, "_driver", drv)
    monkeypatch.setattr(cuda.Gpu, "_cache", {})
    monkeypatch.setattr(cuda, "as_cuda_tensor", as_cuda_tensor)
    monkeypatch.setattr(cuda, "current_stream", lambda torch_device: drv.stream)
    monkeypatch.setattr(cuda, "on_stream", lambda torch_device, stream: contextlib.nullcontext())
    monkeypatch.setattr(cuda, "TimelineSemaphore", drv.timeline)
    getter, real_proc = drv.semaphore_fd_getter(semaphore_fail), sync_mod.device_proc
    monkeypatch.setattr(sync_mod, "device_proc",
                        lambda dev, name: getter if name == "vkGetSemaphoreFdKHR" else real_proc(dev, name))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return drv
