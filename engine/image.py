"""Storage images: the integer RGBA8 targets the compute views write into.

The canvas is ``VK_FORMAT_R8G8B8A8_UINT``: shaders store exact integer
channels (no float→unorm conversion to differ between drivers), and a copy to
a buffer yields the RGBA bytes unchanged. The image lives in ``GENERAL``
layout for its whole life after the first transition.
"""

from __future__ import annotations

import vulkan as vk

from ._vk import new
from .device import Device
from .memory import DEVICE_LOCAL

RGBA8_UINT = vk.VK_FORMAT_R8G8B8A8_UINT


class StorageImage:
    """A 2-D storage image with its own memory and view. States: live → closed.

    ``layout`` tracks the current layout; :class:`~.commands.Recorder`
    transitions it to ``GENERAL`` on first use.
    """

    def __init__(self, device: Device, width: int, height: int, fmt: int = RGBA8_UINT):
        if width < 1 or height < 1:
            raise ValueError(f"image size must be positive, got {width}x{height}")
        self.device = device
        self.width, self.height, self.format = int(width), int(height), fmt
        dev = device.handle
        info = new(
            "VkImageCreateInfo",
            imageType=vk.VK_IMAGE_TYPE_2D,
            format=fmt,
            extent=new("VkExtent3D", width=self.width, height=self.height, depth=1),
            mipLevels=1,
            arrayLayers=1,
            samples=vk.VK_SAMPLE_COUNT_1_BIT,
            tiling=vk.VK_IMAGE_TILING_OPTIMAL,
            usage=vk.VK_IMAGE_USAGE_STORAGE_BIT
            | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
            | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
            initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
        )
        self.handle = vk.vkCreateImage(dev, info, None)
        req = vk.vkGetImageMemoryRequirements(dev, self.handle)
        index = device.memory_type(req.memoryTypeBits, DEVICE_LOCAL)
        self.memory = vk.vkAllocateMemory(
            dev, new("VkMemoryAllocateInfo", allocationSize=req.size, memoryTypeIndex=index), None
        )
        vk.vkBindImageMemory(dev, self.handle, self.memory, 0)
        self._allocated = int(req.size)
        device.account(self._allocated)
        self.view = vk.vkCreateImageView(
            dev,
            new(
                "VkImageViewCreateInfo",
                image=self.handle,
                viewType=vk.VK_IMAGE_VIEW_TYPE_2D,
                format=fmt,
                subresourceRange=subresource_range(),
            ),
            None,
        )
        self.layout = vk.VK_IMAGE_LAYOUT_UNDEFINED

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, memory, view = self.handle, self.memory, self.view
        self.handle = self.memory = self.view = None
        dev = self.device.handle
        device, size = self.device, self._allocated

        def destroy():
            vk.vkDestroyImageView(dev, view, None)
            vk.vkDestroyImage(dev, handle, None)
            vk.vkFreeMemory(dev, memory, None)
            device.account(-size)

        self.device.retire(destroy)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def subresource_range():
    return new(
        "VkImageSubresourceRange",
        aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT,
        baseMipLevel=0,
        levelCount=1,
        baseArrayLayer=0,
        layerCount=1,
    )
