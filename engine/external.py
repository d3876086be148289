"""External memory: buffers over memory shared with other code.

- :func:`import_host_pointer` wraps a range of this process's memory (a CPU
  tensor's own pages) in a ``VkBuffer`` through ``VK_EXT_external_memory_host``.
  The imported range is rounded out to ``minImportedHostPointerAlignment``; the
  caller's bytes start :attr:`ImportedBuffer.offset` bytes into the buffer.
- :class:`ExportableBuffer` allocates device memory that CUDA (or another
  ``VkDevice`` on the same GPU) imports through an opaque fd / Win32 handle;
  :func:`import_external_memory` imports such a handle (ownership rules below).
- :func:`import_metal_buffer` wraps an ``MTLBuffer`` (``VK_EXT_metal_objects``,
  MoltenVK); the ``vulkan`` package's cdef lacks the Metal structs, so they are
  declared here in a small cffi FFI of their own (:data:`METAL_FFI`).

Ownership: the engine never frees imported memory. The caller must keep the
memory alive until the buffer is closed *and* the GPU is done with it — which
``close()`` arranges by handing the memory's keep-alive object to
:meth:`Device.retire` together with the Vulkan objects.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import vulkan as vk

from ._vk import device_proc, ffi, new
from .device import Device
from .memory import ALL_USAGE, DEVICE_LOCAL

HOST_ALLOCATION = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT


class HostImportError(RuntimeError):
    """The driver refused an import; the message says why (the caller falls back to staging)."""


class ImportedBuffer:
    """A ``VkBuffer`` over imported host memory. States: live → closed.

    Attributes
    ----------
    offset : int
        Byte offset of the caller's first byte inside the buffer.
    size : int
        Bytes of the whole (rounded) buffer.
    """

    host_visible = False

    def __init__(self, device: Device, address: int, nbytes: int, keepalive=None):
        if not device.info.has("VK_EXT_external_memory_host"):
            raise HostImportError(f"{device.info.name} lacks VK_EXT_external_memory_host")
        if nbytes <= 0:
            raise HostImportError("nothing to import: the range is empty")
        align = device.info.host_pointer_alignment or 4096
        base = address - address % align
        end = address + nbytes
        end += (-end) % align
        self.device = device
        self.offset = address - base
        self.size = end - base
        self.nbytes = nbytes
        self._keepalive = keepalive
        dev = device.handle
        pointer = ffi.cast("void *", base)
        props = new("VkMemoryHostPointerPropertiesEXT")
        get_props = device_proc(dev, "vkGetMemoryHostPointerPropertiesEXT")
        try:
            get_props(dev, HOST_ALLOCATION, pointer, props)
        except vk.VkError as exc:
            raise HostImportError(f"the driver cannot import this memory ({type(exc).__name__})") from exc
        if props.memoryTypeBits == 0:
            raise HostImportError("the driver offers no memory type for this host memory")
        external = new("VkExternalMemoryBufferCreateInfo", handleTypes=HOST_ALLOCATION)
        try:  # some MoltenVK releases refuse this buffer (MoltenVK issues 2619, 2806): stage instead
            self.handle = vk.vkCreateBuffer(
                dev, new("VkBufferCreateInfo", pNext=external, size=self.size, usage=ALL_USAGE,
                         sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        except vk.VkError as exc:
            raise HostImportError(f"vkCreateBuffer refused a buffer for imported host memory "
                                  f"({type(exc).__name__})") from exc
        req = vk.vkGetBufferMemoryRequirements(dev, self.handle)
        bits = props.memoryTypeBits & req.memoryTypeBits
        if bits == 0:
            vk.vkDestroyBuffer(dev, self.handle, None)
            raise HostImportError("no memory type suits both the buffer and the imported memory")
        index = device.memory_type(bits, 0)
        info = new("VkImportMemoryHostPointerInfoEXT", handleType=HOST_ALLOCATION,
                   pHostPointer=pointer)
        try:
            self.memory = vk.vkAllocateMemory(
                dev, new("VkMemoryAllocateInfo", pNext=info, allocationSize=self.size,
                         memoryTypeIndex=index), None)
        except vk.VkError as exc:
            vk.vkDestroyBuffer(dev, self.handle, None)
            raise HostImportError(f"vkAllocateMemory refused the import ({type(exc).__name__})") from exc
        vk.vkBindBufferMemory(dev, self.handle, self.memory, 0)
        device.account(self.size, imported=True)

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, memory, keep = self.handle, self.memory, self._keepalive
        self.handle = self.memory = self._keepalive = None
        dev = self.device.handle
        device, size = self.device, self.size

        def destroy():
            vk.vkDestroyBuffer(dev, handle, None)
            vk.vkFreeMemory(dev, memory, None)
            device.account(-size, imported=True)
            del keep[:]  # the memory may be freed now that the GPU is done with it

        keep = [keep]
        self.device.retire(destroy)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def import_host_pointer(device: Device, address: int, nbytes: int, keepalive=None) -> ImportedBuffer:
    """Import ``nbytes`` at host ``address``; ``keepalive`` is held until the GPU is done."""
    return ImportedBuffer(device, address, nbytes, keepalive)


# -- opaque handles: memory shared with CUDA (or another Vulkan device) -------------------------
#
# Ownership of OS handles, as the Vulkan and CUDA specifications define it:
# - a POSIX fd imported successfully (vkAllocateMemory with VkImportMemoryFdInfoKHR,
#   cuImportExternalMemory, cuImportExternalSemaphore) belongs to the importer from then on;
#   after a *failed* import it is still ours and we close it;
# - a Win32 NT handle is never taken by an import: we close it after the import, either way;
# - every vkGetMemoryFdKHR / vkGetSemaphoreFdKHR / ...Win32HandleKHR call makes a new handle
#   that the caller owns.
# :func:`import_external_memory` therefore always takes ownership of the handle it is given.

OPAQUE_FD = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
OPAQUE_WIN32 = vk.VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_BIT
# kind -> (memory handle type bit, device extension, handle getter)
MEMORY_HANDLES = {
    "opaque-fd": (OPAQUE_FD, "VK_KHR_external_memory_fd", "vkGetMemoryFdKHR"),
    "opaque-win32": (OPAQUE_WIN32, "VK_KHR_external_memory_win32", "vkGetMemoryWin32HandleKHR"),
}
EXPORT_USAGE = ALL_USAGE


class ExternalMemoryError(RuntimeError):
    """An export or import of shared memory failed; the message says why and what to do."""


def platform_handle_kind(platform: str | None = None) -> str:
    """``opaque-win32`` on Windows, ``opaque-fd`` elsewhere (Linux, and what NVIDIA supports)."""
    return "opaque-win32" if (platform or sys.platform).startswith("win") else "opaque-fd"


def close_os_handle(kind: str, handle: int) -> None:
    """Close a file descriptor (``opaque-fd``) or a Win32 handle (``opaque-win32``) we own."""
    if kind == "opaque-win32":
        import ctypes

        ctypes.windll.kernel32.CloseHandle(ctypes.c_void_p(handle))
    else:
        os.close(handle)


@dataclass(frozen=True)
class MemoryExport:
    """What an importer must repeat about exported memory (the Vulkan spec asks the
    allocation size, memory type and dedicated buffer parameters to match)."""

    kind: str
    allocation_size: int
    buffer_size: int
    memory_type_index: int | None
    dedicated: bool
    device_uuid: bytes


def external_buffer_features(device: Device, kind: str) -> int:
    """``VkExternalMemoryFeatureFlags`` for buffers of ``kind`` handles on this device."""
    bit = MEMORY_HANDLES[kind][0]
    info = new("VkPhysicalDeviceExternalBufferInfo", usage=EXPORT_USAGE, handleType=bit)
    props = new("VkExternalBufferProperties")
    vk.vkGetPhysicalDeviceExternalBufferProperties(device.info.handle, info, props)
    return int(props.externalMemoryProperties.externalMemoryFeatures)


def _require(device: Device, kind: str) -> int:
    if kind not in MEMORY_HANDLES:
        raise ExternalMemoryError(f"unknown handle kind {kind!r}; one of {tuple(MEMORY_HANDLES)}")
    bit, ext, _ = MEMORY_HANDLES[kind]
    if ext not in device.extensions:
        raise ExternalMemoryError(f"{device.info.name} lacks {ext}, so its memory cannot be shared "
                                  f"as {kind} handles; update the GPU driver")
    return bit


def _buffer(device: Device, size: int, bit: int):
    """A buffer for shared memory; a refusal is an ExternalMemoryError (the caller stages)."""
    external = new("VkExternalMemoryBufferCreateInfo", handleTypes=bit)
    try:
        return vk.vkCreateBuffer(device.handle, new("VkBufferCreateInfo", pNext=external, size=size,
                                                     usage=EXPORT_USAGE,
                                                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
    except vk.VkError as exc:
        raise ExternalMemoryError(f"vkCreateBuffer refused a {size:,}-byte buffer for shared memory "
                                  f"({type(exc).__name__})") from exc


class _ExternalBufferBase:
    """A ``VkBuffer`` bound to shareable memory. States: live → closed."""

    host_visible = False
    _imported = False

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, memory, keep = self.handle, self.memory, self._keepalive
        self.handle = self.memory = self._keepalive = None
        device, size, imported = self.device, self.allocation_size, self._imported
        if device.handle is None:  # the device was closed first (interpreter shutdown)
            return
        dev = device.handle

        def destroy():
            vk.vkDestroyBuffer(dev, handle, None)
            vk.vkFreeMemory(dev, memory, None)
            device.account(-size, imported=imported)
            del keep[:]

        keep = [keep]
        device.retire(destroy)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ExportableBuffer(_ExternalBufferBase):
    """Device-local memory allocated by Vulkan *to be shared* (CUDA imports it).

    A dedicated allocation (``VkMemoryDedicatedAllocateInfo``) made exportable as
    ``kind`` handles (``VkExportMemoryAllocateInfo``), bound to a buffer of ``nbytes``
    (rounded up to 256). :meth:`export` returns a new OS handle for each importer.
    This is the allocation direction Datoviz and Taichi chose (see docs/contract.md).
    """

    offset = 0

    def __init__(self, device: Device, nbytes: int, kind: str | None = None):
        kind = kind or platform_handle_kind()
        bit = _require(device, kind)
        features = external_buffer_features(device, kind)
        if not features & vk.VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT:
            raise ExternalMemoryError(f"{device.info.name} cannot export buffer memory as {kind} "
                                      "handles (vkGetPhysicalDeviceExternalBufferProperties)")
        self.device, self.kind, self.nbytes = device, kind, int(nbytes)
        self.size = max(256, -(-int(nbytes) // 256) * 256)
        self._keepalive = None
        dev = device.handle
        self.handle = _buffer(device, self.size, bit)
        req = vk.vkGetBufferMemoryRequirements(dev, self.handle)
        self.memory_type_index = device.memory_type(req.memoryTypeBits, DEVICE_LOCAL, fallback=0)
        self.allocation_size = int(req.size)
        dedicated = new("VkMemoryDedicatedAllocateInfo", buffer=self.handle)
        export = new("VkExportMemoryAllocateInfo", pNext=dedicated, handleTypes=bit)
        try:
            self.memory = vk.vkAllocateMemory(dev, new("VkMemoryAllocateInfo", pNext=export,
                                                       allocationSize=self.allocation_size,
                                                       memoryTypeIndex=self.memory_type_index), None)
        except vk.VkError as exc:
            vk.vkDestroyBuffer(dev, self.handle, None)
            self.handle = None
            raise ExternalMemoryError(f"vkAllocateMemory refused {self.allocation_size:,} bytes of "
                                      f"exportable memory ({type(exc).__name__})") from exc
        try:
            vk.vkBindBufferMemory(dev, self.handle, self.memory, 0)
        except vk.VkError as exc:
            vk.vkDestroyBuffer(dev, self.handle, None)
            vk.vkFreeMemory(dev, self.memory, None)
            self.handle = None
            raise ExternalMemoryError(f"vkBindBufferMemory failed for exportable memory "
                                      f"({type(exc).__name__})") from exc
        device.account(self.allocation_size)

    def export(self) -> tuple[int, MemoryExport]:
        """A new OS handle to the memory (the caller owns it) and what an importer must know."""
        if self.handle is None:
            raise ExternalMemoryError("the buffer is closed")
        bit, _, getter = MEMORY_HANDLES[self.kind]
        dev = self.device.handle
        try:
            if self.kind == "opaque-fd":
                handle = device_proc(dev, getter)(dev, new("VkMemoryGetFdInfoKHR", memory=self.memory,
                                                            handleType=bit))
            else:
                out = device_proc(dev, getter)(dev, new("VkMemoryGetWin32HandleInfoKHR",
                                                         memory=self.memory, handleType=bit))
                handle = int(ffi.cast("uintptr_t", out))
        except vk.VkError as exc:  # e.g. VkErrorTooManyObjects: the process is out of fds
            raise ExternalMemoryError(f"{getter} failed ({type(exc).__name__})") from exc
        return int(handle), MemoryExport(self.kind, self.allocation_size, self.size,
                                         self.memory_type_index, True, self.device.info.device_uuid)


class ImportedExternalBuffer(_ExternalBufferBase):
    """A ``VkBuffer`` over memory another API (or device) exported. States: live → closed.

    Parameters
    ----------
    handle : int
        An fd or Win32 handle; **always taken over** (see the ownership notes above).
    memory : MemoryExport
        The exporter's parameters (allocation size, memory type, dedicated).
    offset : int
        Byte offset of the caller's first byte inside the buffer.
    keepalive : object
        Held until the GPU is done with the import (the exporter's memory owner).
    """

    _imported = True

    def __init__(self, device: Device, handle: int, memory: MemoryExport, offset: int = 0,
                 keepalive=None):
        kind = memory.kind
        try:
            bit = _require(device, kind)
            if memory.device_uuid and memory.device_uuid != device.info.device_uuid:
                raise ExternalMemoryError(
                    f"the memory belongs to GPU {memory.device_uuid.hex()}, but {device.info.name} is "
                    f"{device.info.device_uuid.hex()}: memory can only be shared on one GPU")
        except Exception:
            close_os_handle(kind, handle)
            raise
        self.device, self.kind, self.offset = device, kind, int(offset)
        self.size, self.allocation_size = memory.buffer_size, memory.allocation_size
        self._keepalive = keepalive
        dev = device.handle
        self.handle = self.memory = None
        consumed = False
        try:
            self.handle = _buffer(device, self.size, bit)
            req = vk.vkGetBufferMemoryRequirements(dev, self.handle)
            index = memory.memory_type_index
            if index is None or not req.memoryTypeBits & (1 << index):
                index = device.memory_type(req.memoryTypeBits, DEVICE_LOCAL, fallback=0)
            dedicated = new("VkMemoryDedicatedAllocateInfo", buffer=self.handle) if memory.dedicated else None
            if kind == "opaque-fd":
                info = new("VkImportMemoryFdInfoKHR", pNext=dedicated, handleType=bit, fd=handle)
            else:
                info = new("VkImportMemoryWin32HandleInfoKHR", pNext=dedicated, handleType=bit,
                           handle=ffi.cast("HANDLE", handle))
            try:
                self.memory = vk.vkAllocateMemory(dev, new("VkMemoryAllocateInfo", pNext=info,
                                                           allocationSize=memory.allocation_size,
                                                           memoryTypeIndex=index), None)
            except vk.VkError as exc:
                raise ExternalMemoryError(f"vkAllocateMemory refused the {kind} import "
                                          f"({type(exc).__name__})") from exc
            consumed = kind == "opaque-fd"  # the fd is the driver's now
            vk.vkBindBufferMemory(dev, self.handle, self.memory, 0)
        except Exception as exc:
            if self.memory is not None:
                vk.vkFreeMemory(dev, self.memory, None)
            if self.handle is not None:
                vk.vkDestroyBuffer(dev, self.handle, None)
            self.handle = None
            if not consumed:
                close_os_handle(kind, handle)
            if isinstance(exc, vk.VkError):  # the caller stages on ExternalMemoryError
                raise ExternalMemoryError(f"importing the {kind} memory failed ({type(exc).__name__})") from exc
            raise
        finally:
            if kind == "opaque-win32" and self.handle is not None:
                close_os_handle(kind, handle)  # an import never takes a Win32 handle
        device.account(self.allocation_size, imported=True)


def import_external_memory(device: Device, handle: int, memory: MemoryExport, offset: int = 0,
                           keepalive=None) -> ImportedExternalBuffer:
    """Import exported memory as a buffer; takes ownership of ``handle`` in every case."""
    return ImportedExternalBuffer(device, handle, memory, offset, keepalive)


# -- Metal buffers (MoltenVK, VK_EXT_metal_objects) ---------------------------------------------

# The vulkan package's cdef has no Metal types, and its FFI is compiled out of line (no
# ffi.cdef to extend it). This FFI declares the one struct we chain: the layout is the
# Vulkan header's (VkStructureType is a C enum, an int; MTLBuffer_id is `void *` outside
# Objective-C). The struct is passed by address in pNext.
METAL_CDEF = """
typedef int VkStructureType;
typedef void *MTLBuffer_id;
typedef struct VkImportMetalBufferInfoEXT {
    VkStructureType sType;
    const void *pNext;
    MTLBuffer_id mtlBuffer;
} VkImportMetalBufferInfoEXT;
"""


def _metal_ffi():
    import cffi

    f = cffi.FFI()
    f.cdef(METAL_CDEF)
    return f


METAL_FFI = _metal_ffi()


def metal_buffer_info(mtl_buffer: int):
    """A ``VkImportMetalBufferInfoEXT`` for ``mtl_buffer`` (an ``id<MTLBuffer>`` address),
    and its address as the ``vulkan`` package's ``void *`` for a pNext chain."""
    info = METAL_FFI.new("VkImportMetalBufferInfoEXT *")
    info.sType = vk.VK_STRUCTURE_TYPE_IMPORT_METAL_BUFFER_INFO_EXT
    info.mtlBuffer = METAL_FFI.cast("void *", mtl_buffer)
    return info, ffi.cast("void *", int(METAL_FFI.cast("uintptr_t", info)))


class MetalBuffer(_ExternalBufferBase):
    """A ``VkBuffer`` over an ``MTLBuffer`` (``VK_EXT_metal_objects``). States: live → closed.

    The whole ``MTLBuffer`` (``length`` bytes) becomes the memory; the caller's bytes
    start :attr:`offset` bytes in. MoltenVK retains the ``MTLBuffer`` while the memory
    lives; ``keepalive`` (the tensor's storage) is held until the GPU is done anyway.
    """

    _imported = True

    def __init__(self, device: Device, mtl_buffer: int, length: int, offset: int = 0, keepalive=None):
        if "VK_EXT_metal_objects" not in device.extensions:
            raise ExternalMemoryError(f"{device.info.name} lacks VK_EXT_metal_objects; update "
                                      "MoltenVK (1.2 or later, with the Vulkan SDK or Homebrew)")
        if not mtl_buffer or length <= 0:
            raise ExternalMemoryError("no MTLBuffer to import (null pointer or zero length)")
        self.device, self.kind, self.offset = device, "metal-buffer", int(offset)
        self.size = self.allocation_size = int(length)
        self._keepalive = keepalive
        dev = device.handle
        self.memory = None
        try:
            self.handle = vk.vkCreateBuffer(dev, new("VkBufferCreateInfo", size=self.size, usage=ALL_USAGE,
                                                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        except vk.VkError as exc:
            self.handle = None
            raise ExternalMemoryError(f"vkCreateBuffer refused a buffer over the MTLBuffer "
                                      f"({type(exc).__name__})") from exc
        req = vk.vkGetBufferMemoryRequirements(dev, self.handle)
        index = device.memory_type(req.memoryTypeBits, DEVICE_LOCAL, fallback=0)
        metal, pnext = metal_buffer_info(mtl_buffer)
        try:
            self.memory = vk.vkAllocateMemory(dev, new("VkMemoryAllocateInfo", pNext=pnext,
                                                       allocationSize=self.size,
                                                       memoryTypeIndex=index), None)
        except vk.VkError as exc:
            vk.vkDestroyBuffer(dev, self.handle, None)
            self.handle = None
            raise ExternalMemoryError(f"MoltenVK refused the MTLBuffer import ({type(exc).__name__})") \
                from exc
        finally:
            del metal
        vk.vkBindBufferMemory(dev, self.handle, self.memory, 0)
        device.account(self.size, imported=True)


def import_metal_buffer(device: Device, mtl_buffer: int, length: int, offset: int = 0,
                        keepalive=None) -> MetalBuffer:
    """Import the ``MTLBuffer`` at ``mtl_buffer`` (``length`` bytes) as a buffer."""
    return MetalBuffer(device, mtl_buffer, length, offset, keepalive)
