"""Command recording: the small vocabulary views use to describe their passes.

Views never call ``vk*`` themselves; they record through a :class:`Recorder`
(fill, dispatch, barrier, clear, copy). A recorded command buffer is reused
frame after frame until its owner marks it stale (a resource changed).
"""

from __future__ import annotations

import vulkan as vk

from ._vk import WHOLE_SIZE, ffi, new
from .device import Device
from .image import StorageImage, subresource_range
from .limits import check_dispatch


def _check(result: int) -> None:
    if result != vk.VK_SUCCESS:
        raise vk.exception_codes[result]


class Recorder:
    """Records one primary command buffer. States: recording → ended → closed."""

    def __init__(self, device: Device):
        self.device = device
        self.handle = device.allocate_command_buffer()
        self.recording = False
        self.profiler = None  # a timing.Profiler while the owner profiles its frames
        # Reused structs for the calls a per-frame recording makes (History.keep): they go
        # straight to the loader, as the generic wrappers and new() cost ~10 us a call.
        # Vulkan copies what a vkCmd* call reads before it returns, so reusing them is safe.
        self._begin_info = new("VkCommandBufferBeginInfo")
        self._region = ffi.new("VkBufferCopy *")

    def mark(self, label: str) -> None:
        """Write a GPU timestamp named ``label`` (only while profiling; free otherwise)."""
        if self.profiler is not None:
            self.profiler.write(self, label)

    def begin(self) -> Recorder:
        _check(vk.lib.vkResetCommandBuffer(self.handle, 0))
        _check(vk.lib.vkBeginCommandBuffer(self.handle, self._begin_info))
        self.recording = True
        return self

    def end(self) -> None:
        _check(vk.lib.vkEndCommandBuffer(self.handle))
        self.recording = False

    # -- commands -------------------------------------------------------------------
    def fill(self, buffer, value: int = 0, offset: int = 0, size: int = WHOLE_SIZE) -> None:
        """Fill ``buffer`` with the 32-bit word ``value``."""
        vk.vkCmdFillBuffer(self.handle, buffer.handle, offset, size, value & 0xFFFFFFFF)

    def barrier(self) -> None:
        """Make all earlier compute/transfer writes visible to later compute/transfer work (uniform
        reads included)."""
        mb = new(
            "VkMemoryBarrier",
            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
            | vk.VK_ACCESS_UNIFORM_READ_BIT  # a pass may write a later pass's parameter block
            | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
        )
        stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        vk.vkCmdPipelineBarrier(self.handle, stages, stages, 0, 1, mb, 0, None, 0, None)

    def host_barrier(self) -> None:
        """Make earlier writes visible to the host (before reading mapped memory)."""
        mb = new(
            "VkMemoryBarrier",
            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT,
        )
        vk.vkCmdPipelineBarrier(
            self.handle,
            vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
            vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, mb, 0, None, 0, None,
        )

    def to_general(self, image: StorageImage) -> None:
        """Transition ``image`` into GENERAL layout (once; later calls are barriers)."""
        ib = new(
            "VkImageMemoryBarrier",
            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
            | vk.VK_ACCESS_TRANSFER_READ_BIT,
            dstAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
            newLayout=vk.VK_IMAGE_LAYOUT_GENERAL,
            srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
            dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
            image=image.handle,
            subresourceRange=subresource_range(),
        )
        stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        vk.vkCmdPipelineBarrier(self.handle, stages, stages, 0, 0, None, 0, None, 1, ib)
        image.layout = vk.VK_IMAGE_LAYOUT_GENERAL

    def clear(self, image: StorageImage, rgba) -> None:
        """Clear an integer image to ``rgba`` (four ints)."""
        color = new("VkClearColorValue")
        for i, c in enumerate(rgba):
            color.uint32[i] = int(c)
        vk.vkCmdClearColorImage(
            self.handle, image.handle, vk.VK_IMAGE_LAYOUT_GENERAL, color, 1, subresource_range()
        )

    def dispatch(self, descriptor_set, x: int, y: int = 1, z: int = 1) -> None:
        pipeline = descriptor_set.pipeline
        vk.vkCmdBindPipeline(self.handle, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
        vk.vkCmdBindDescriptorSets(
            self.handle, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1,
            [descriptor_set.handle], 0, None,
        )
        if x and y and z:
            check_dispatch(self.device.info, pipeline.name, x, y, z)
            vk.vkCmdDispatch(self.handle, x, y, z)

    def copy_buffer(self, src, dst, size: int, src_offset: int = 0, dst_offset: int = 0) -> None:
        region = self._region
        region.srcOffset, region.dstOffset, region.size = src_offset, dst_offset, size
        vk.lib.vkCmdCopyBuffer(self.handle, src.handle, dst.handle, 1, region)

    def copy_buffer_to_image(self, buffer, image: StorageImage, x: int, y: int, width: int,
                             height: int) -> None:
        """Copy tightly packed RGBA8 rows from ``buffer`` into a rectangle of ``image``."""
        region = new(
            "VkBufferImageCopy",
            bufferOffset=0, bufferRowLength=0, bufferImageHeight=0,
            imageSubresource=new("VkImageSubresourceLayers", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT,
                                 mipLevel=0, baseArrayLayer=0, layerCount=1),
            imageOffset=new("VkOffset3D", x=x, y=y, z=0),
            imageExtent=new("VkExtent3D", width=width, height=height, depth=1),
        )
        vk.vkCmdCopyBufferToImage(self.handle, buffer.handle, image.handle,
                                  vk.VK_IMAGE_LAYOUT_GENERAL, 1, region)

    def fill_rect(self, row, image: StorageImage, x: int, y: int, width: int, height: int) -> None:
        """Fill a rectangle of ``image`` by copying the packed RGBA8 row in ``row`` (``width``
        pixels) into each of its rows: a transfer, far cheaper than a compute pass per pixel
        on CPU implementations."""
        regions = ffi.new("VkBufferImageCopy[]", height)
        for r in range(height):
            reg = regions[r]
            reg.imageSubresource.aspectMask = vk.VK_IMAGE_ASPECT_COLOR_BIT
            reg.imageSubresource.layerCount = 1
            reg.imageOffset.x, reg.imageOffset.y = x, y + r
            reg.imageExtent.width, reg.imageExtent.height, reg.imageExtent.depth = width, 1, 1
        vk.vkCmdCopyBufferToImage(self.handle, row.handle, image.handle, vk.VK_IMAGE_LAYOUT_GENERAL,
                                  height, regions)

    def copy_image_to_buffer(self, image: StorageImage, buffer) -> None:
        region = new(
            "VkBufferImageCopy",
            bufferOffset=0,
            bufferRowLength=0,
            bufferImageHeight=0,
            imageSubresource=new(
                "VkImageSubresourceLayers",
                aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT,
                mipLevel=0,
                baseArrayLayer=0,
                layerCount=1,
            ),
            imageOffset=new("VkOffset3D", x=0, y=0, z=0),
            imageExtent=new("VkExtent3D", width=image.width, height=image.height, depth=1),
        )
        vk.vkCmdCopyImageToBuffer(
            self.handle, image.handle, vk.VK_IMAGE_LAYOUT_GENERAL, buffer.handle, 1, region
        )

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, self.handle = self.handle, None
        self.device.free_command_buffer(handle)
