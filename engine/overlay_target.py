"""The overlay's target: its colour attachment, and where the host reads a frame from.

On a GPU the target is an optimal-tiling image in device-local memory and a frame the host
wants is copied into a readback buffer (:class:`~.overlay.Overlay` records that copy). On a
CPU device (lavapipe) all memory is host memory and the rasteriser stores images linearly
anyway, so that copy is pure overhead: 13 MB written and read again per frame at 2400x1400,
about 4 ms of a dashboard's cursor move, and 13 MB of resident memory for the buffer. There the
target is made with linear tiling in host-visible memory and :attr:`OverlayTarget.host` is
a view of its own pixels, read in place once the frame's fence has signalled (after the
barrier :func:`record_host_read` records). Whether the device may do so is asked, not
assumed: linear tiling must allow every use the overlay makes of the image
(:func:`_linear_allowed`), and the rows must be tightly packed.
"""

from __future__ import annotations

import numpy as np
import vulkan as vk

from ._vk import new
from .device import Device
from .graphics import TARGET_FORMAT
from .image import RGBA8_UINT, create_image, create_view

_USAGE = (vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_STORAGE_BIT
          | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
_FLAGS = vk.VK_IMAGE_CREATE_MUTABLE_FORMAT_BIT
# what linear tiling must allow: drawn with blending, copied and blitted (a window presents it,
# a texture links it), and the UINT view a storage image
_TRANSFER_SRC, _TRANSFER_DST = 0x4000, 0x8000  # VK_FORMAT_FEATURE_TRANSFER_{SRC,DST}_BIT (Vulkan 1.1;
# the vulkan package binds only their _KHR aliases, to None)
_UNORM_FEATURES = (vk.VK_FORMAT_FEATURE_COLOR_ATTACHMENT_BIT | vk.VK_FORMAT_FEATURE_COLOR_ATTACHMENT_BLEND_BIT
                   | _TRANSFER_SRC | _TRANSFER_DST
                   | vk.VK_FORMAT_FEATURE_BLIT_SRC_BIT)
_UINT_FEATURES = vk.VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT


class OverlayTarget:
    """The overlay's colour attachment, also viewable as an ``R8G8B8A8_UINT`` storage image.

    Attributes used by the rest of the engine, as on a
    :class:`~.image.StorageImage`: ``handle``, ``view`` (the ``UINT`` view),
    ``width``, ``height``, ``layout``. ``host``: a read-only ``(height, width, 4)`` view of the
    pixels in place (CPU devices, see the module), else None. Owned by its :class:`Overlay`.
    """

    def __init__(self, device: Device, render_pass, width: int, height: int):
        self.device = device
        self.width, self.height = int(width), int(height)
        self.format = TARGET_FORMAT
        dev = device.handle
        linear = _linear_allowed(device, self.width, self.height)
        self.handle, self.memory, self._allocated = create_image(
            device, self.width, self.height, TARGET_FORMAT, _USAGE, flags=_FLAGS, linear=linear)
        self.host = None
        self._mapped = None
        if linear:
            self._map()
        self.attachment_view = create_view(device, self.handle, TARGET_FORMAT)
        self.view = create_view(device, self.handle, RGBA8_UINT)
        self.framebuffer = vk.vkCreateFramebuffer(dev, new(
            "VkFramebufferCreateInfo", renderPass=render_pass, attachmentCount=1,
            pAttachments=[self.attachment_view], width=self.width, height=self.height, layers=1), None)
        self.layout = vk.VK_IMAGE_LAYOUT_UNDEFINED

    def _map(self) -> None:
        """``host`` from the linear image's memory, when its rows are tightly packed (else the
        overlay copies to a readback buffer as on a GPU)."""
        dev = self.device.handle
        layout = vk.vkGetImageSubresourceLayout(dev, self.handle, new(
            "VkImageSubresource", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0, arrayLayer=0))
        row = self.width * 4
        if layout.rowPitch != row or layout.size < row * self.height:
            return
        self._mapped = vk.vkMapMemory(dev, self.memory, 0, self._allocated, 0)
        view = np.frombuffer(self._mapped, np.uint8, count=row * self.height, offset=int(layout.offset))
        self.host = view.reshape(self.height, self.width, 4)
        self.host.flags.writeable = False

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        objects = (self.handle, self.memory, self.attachment_view, self.view, self.framebuffer)
        mapped = self._mapped is not None
        self.handle = self.memory = self.view = self.attachment_view = self.framebuffer = None
        self.host = self._mapped = None
        dev, device, size = self.device.handle, self.device, self._allocated

        def destroy():
            handle, memory, attachment_view, view, framebuffer = objects
            vk.vkDestroyFramebuffer(dev, framebuffer, None)
            vk.vkDestroyImageView(dev, view, None)
            vk.vkDestroyImageView(dev, attachment_view, None)
            vk.vkDestroyImage(dev, handle, None)
            if mapped:
                vk.vkUnmapMemory(dev, memory)
            vk.vkFreeMemory(dev, memory, None)
            device.account(-size)

        self.device.retire(destroy)


def record_host_read(cb) -> None:
    """Make the frame's writes to the target (its render passes, the kept regions' copies)
    visible to a host reading :attr:`OverlayTarget.host` after the fence."""
    barrier = new("VkMemoryBarrier",
                  srcAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                  dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
    vk.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
                            | vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                            barrier, 0, None, 0, None)


def _linear_allowed(device: Device, width: int, height: int) -> bool:
    """Whether the target is read in place: a CPU device whose linear tiling allows every use
    of the target at this size (checked, as a device profile may forbid it)."""
    info = device.info
    if info.kind != "cpu" or getattr(info, "profile", None) not in (None, ""):
        return False
    pd = info.handle
    unorm = vk.vkGetPhysicalDeviceFormatProperties(pd, TARGET_FORMAT).linearTilingFeatures
    uint = vk.vkGetPhysicalDeviceFormatProperties(pd, RGBA8_UINT).linearTilingFeatures
    if unorm & _UNORM_FEATURES != _UNORM_FEATURES or uint & _UINT_FEATURES != _UINT_FEATURES:
        return False
    try:
        props = vk.vkGetPhysicalDeviceImageFormatProperties(
            pd, TARGET_FORMAT, vk.VK_IMAGE_TYPE_2D, vk.VK_IMAGE_TILING_LINEAR, _USAGE, _FLAGS)
    except vk.VkError:  # VK_ERROR_FORMAT_NOT_SUPPORTED: this combination is not allowed linear
        return False
    return props.maxExtent.width >= width and props.maxExtent.height >= height
