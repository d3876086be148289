"""Buffers: device-local, persistently mapped host-visible, and readback.

Ownership: a :class:`Buffer` owns its ``VkBuffer`` and ``VkDeviceMemory`` and
releases both through :meth:`Device.retire`, so closing a buffer that a
submitted frame still reads is safe. A host-visible buffer stays mapped for its
whole life; :attr:`Buffer.array` is a numpy view of the mapping (valid until
``close``).
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

from ._vk import ffi, new
from .device import Device

STORAGE = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
TRANSFER_SRC = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
TRANSFER_DST = vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
UNIFORM = vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT  # parameter blocks (views bind them as "uniform")
ALL_USAGE = STORAGE | UNIFORM | TRANSFER_SRC | TRANSFER_DST

HOST_VISIBLE = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
HOST_CACHED = vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
DEVICE_LOCAL = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT


class Buffer:
    """A ``VkBuffer`` with its own memory. States: live → closed.

    Parameters
    ----------
    device : Device
        Borrowed; must outlive the buffer.
    size : int
        Bytes; at least 4 (Vulkan forbids empty buffers, so callers round up).
    host_visible : bool
        Persistently mapped, coherent memory the CPU can read and write.
    readback : bool
        Prefer host-cached memory (fast CPU reads of GPU results).
    """

    def __init__(self, device: Device, size: int, host_visible: bool = True,
                 readback: bool = False, usage: int = ALL_USAGE):
        self.device = device
        self.size = max(4, (int(size) + 3) // 4 * 4)
        self.host_visible = host_visible
        dev = device.handle
        self.handle = vk.vkCreateBuffer(
            dev,
            new("VkBufferCreateInfo", size=self.size, usage=usage,
                sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE),
            None,
        )
        req = vk.vkGetBufferMemoryRequirements(dev, self.handle)
        if host_visible and readback:
            index = device.memory_type(req.memoryTypeBits, HOST_VISIBLE | HOST_CACHED, fallback=HOST_VISIBLE)
        elif host_visible:
            index = device.memory_type(req.memoryTypeBits, HOST_VISIBLE)
        else:
            index = device.memory_type(req.memoryTypeBits, DEVICE_LOCAL)
        self.memory = vk.vkAllocateMemory(
            dev, new("VkMemoryAllocateInfo", allocationSize=req.size, memoryTypeIndex=index), None
        )
        vk.vkBindBufferMemory(dev, self.handle, self.memory, 0)
        self._allocated = int(req.size)
        device.account(self._allocated)
        self._mapped = None
        self.array = None
        if host_visible:
            self._mapped = vk.vkMapMemory(dev, self.memory, 0, self.size, 0)
            self.array = np.frombuffer(self._mapped, dtype=np.uint8, count=self.size)

    @property
    def address(self) -> int:
        """Host address of the mapping (host-visible buffers only)."""
        return int(ffi.cast("uintptr_t", ffi.from_buffer(self._mapped)))

    def view(self, dtype, count: int | None = None) -> np.ndarray:
        """The mapping as a numpy array of ``dtype`` (host-visible buffers only)."""
        if self.array is None:
            raise RuntimeError("this buffer is device-local; it has no host mapping")
        dtype = np.dtype(dtype)
        n = self.size // dtype.itemsize if count is None else count
        return self.array[: n * dtype.itemsize].view(dtype)

    def write(self, data: np.ndarray, offset: int = 0) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if offset + raw.size > self.size:
            raise ValueError(f"{raw.size} bytes at {offset} overflow a {self.size}-byte buffer")
        self.array[offset : offset + raw.size] = raw

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, memory, self.handle, self.memory = self.handle, self.memory, None, None
        self.array = None
        mapped, self._mapped = self._mapped, None
        dev = self.device.handle
        device, size = self.device, self._allocated

        def destroy():
            if mapped is not None:
                vk.vkUnmapMemory(dev, memory)
            vk.vkDestroyBuffer(dev, handle, None)
            vk.vkFreeMemory(dev, memory, None)
            device.account(-size)

        self.device.retire(destroy)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
