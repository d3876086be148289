"""Storage images: the integer RGBA8 targets the compute views write into.

The canvas is ``VK_FORMAT_R8G8B8A8_UINT``: shaders store exact integer
channels (no float→unorm conversion to differ between drivers), and a copy to
a buffer yields the RGBA bytes unchanged. The image lives in ``GENERAL``
layout for its whole life after the first transition.
"""

from __future__ import annotations

from pathlib import Path

import vulkan as vk

from ._vk import new
from .device import Device
from .limits import check_image
from .memory import DEVICE_LOCAL, HOST_CACHED, HOST_VISIBLE

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
        usage = (vk.VK_IMAGE_USAGE_STORAGE_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
        self.handle, self.memory, self._allocated = create_image(device, self.width, self.height, fmt, usage)
        self.view = create_view(device, self.handle, fmt)
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


def create_image(device: Device, width: int, height: int, fmt: int, usage: int, flags: int = 0,
                 linear: bool = False):
    """A 2-D optimal-tiling image in its own device-local memory, counted in the device's
    memory statistics: ``(image, memory, allocated bytes)``. The caller destroys all three
    (and calls ``device.account(-allocated)``). ``linear``: linear tiling in host-visible
    memory instead, so the host can read it in place (see ``vkGetImageSubresourceLayout``)."""
    check_image(device.info, int(width), int(height))
    dev = device.handle
    handle = vk.vkCreateImage(dev, new(
        "VkImageCreateInfo", flags=flags, imageType=vk.VK_IMAGE_TYPE_2D, format=fmt,
        extent=new("VkExtent3D", width=int(width), height=int(height), depth=1), mipLevels=1,
        arrayLayers=1, samples=vk.VK_SAMPLE_COUNT_1_BIT,
        tiling=vk.VK_IMAGE_TILING_LINEAR if linear else vk.VK_IMAGE_TILING_OPTIMAL, usage=usage,
        sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED), None)
    req = vk.vkGetImageMemoryRequirements(dev, handle)
    want = (HOST_VISIBLE | HOST_CACHED, HOST_VISIBLE) if linear else (DEVICE_LOCAL, None)
    memory = vk.vkAllocateMemory(dev, new(
        "VkMemoryAllocateInfo", allocationSize=req.size,
        memoryTypeIndex=device.memory_type(req.memoryTypeBits, *want)), None)
    vk.vkBindImageMemory(dev, handle, memory, 0)
    device.account(int(req.size))
    return handle, memory, int(req.size)


def create_view(device: Device, image, fmt: int, components=None):
    """A 2-D colour view of ``image`` in ``fmt`` (identity swizzle unless ``components``)."""
    extra = {} if components is None else {"components": components}
    return vk.vkCreateImageView(device.handle, new(
        "VkImageViewCreateInfo", image=image, viewType=vk.VK_IMAGE_VIEW_TYPE_2D, format=fmt,
        subresourceRange=subresource_range(), **extra), None)


# Image files a frame can be written to, by suffix; those without alpha get the frame's RGB (every
# frame is opaque: its alpha is 255 throughout).
IMAGE_SUFFIXES = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP", ".bmp": "BMP",
                  ".tif": "TIFF", ".tiff": "TIFF"}
_NO_ALPHA = ("JPEG", "BMP")


def write_png(path, rgba) -> Path:
    """Write ``(h, w, 4)`` uint8 RGBA to an image file, creating the folder; returns the path.

    The format follows the suffix (:data:`IMAGE_SUFFIXES`: PNG, lossless, is what the byte-exact
    checks read; JPEG at quality 95 for sharing); any other suffix is a ValueError naming them."""
    from PIL import Image

    path = Path(path)
    fmt = IMAGE_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: cannot write a {path.suffix or 'suffix-less'} image; write one of "
                         f"{', '.join(sorted(IMAGE_SUFFIXES))} (.png is lossless)")
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(rgba, "RGBA")
    if fmt in _NO_ALPHA:
        image = image.convert("RGB")
    image.save(path, fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return path


def subresource_range():
    return new(
        "VkImageSubresourceRange",
        aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT,
        baseMipLevel=0,
        levelCount=1,
        baseArrayLayer=0,
        layerCount=1,
    )
