"""External memory: buffers over memory the engine did not allocate.

:func:`import_host_pointer` wraps a range of this process's memory (a CPU
tensor's own pages) in a ``VkBuffer`` through ``VK_EXT_external_memory_host``.
The imported range is rounded out to ``minImportedHostPointerAlignment``; the
caller's bytes start :attr:`ImportedBuffer.offset` bytes into the buffer.

Ownership: the engine never frees imported memory. The caller must keep the
memory alive until the buffer is closed *and* the GPU is done with it — which
``close()`` arranges by handing the memory's keep-alive object to
:meth:`Device.retire` together with the Vulkan objects.
"""

from __future__ import annotations

import vulkan as vk

from ._vk import device_proc, ffi, new
from .device import Device
from .memory import ALL_USAGE

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
        self.handle = vk.vkCreateBuffer(
            dev, new("VkBufferCreateInfo", pNext=external, size=self.size, usage=ALL_USAGE,
                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
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
