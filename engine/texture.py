"""Sampled textures for the overlay renderer: uploaded from the host, or linked to an engine image.

A :class:`Texture` is a 2-D ``R8G8B8A8_UNORM`` (``"rgba8"``) or ``R8_UNORM``
(``"alpha8"``: sampled as white with the texel as alpha, through the image
view's swizzle) image with its own descriptor set (texture + a linear or
nearest sampler) for the device's overlay pipeline (:mod:`.graphics`).

Uploads are deferred, the way pygfx uploads dirty ranges just before submit:
:meth:`Texture.update` copies the pixels into host memory at once (the caller
may reuse its array) and queues the rectangle; the next
:meth:`~.overlay.Overlay.submit` that draws the texture records every queued
rectangle of every texture it draws into one staging buffer and one transfer
command buffer ahead of the frame (:func:`record_uploads`). A new texture is
queued with its whole area (zeros unless ``pixels`` is given), so it is never
sampled uninitialised.

A *linked* texture (:meth:`Texture.link`) shows an engine image -- a canvas's
``R8G8B8A8_UINT`` storage image -- without a host round trip: every overlay
frame that draws it first ``vkCmdCopyImage``\\ s the image into the texture
(``UINT`` and ``UNORM`` share a compatibility class, so the bytes move
unchanged). The image must have been drawn once (be in ``GENERAL`` layout),
keep the texture's size, and outlive the link; the frame that shows it must be
submitted after the frame that drew it (same queue, so barriers order them).

Layouts: a texture is ``SHADER_READ_ONLY_OPTIMAL`` between frames; transfers
move it to ``TRANSFER_DST_OPTIMAL`` and back. Ownership: the texture owns its
image, view and descriptor pool and releases them through
:meth:`Device.retire` (a frame in flight may still sample it).
"""

from __future__ import annotations

import itertools

import numpy as np
import vulkan as vk

from ._vk import ffi, new
from .device import Device
from .graphics import FILTERS, overlay_pipeline
from .image import create_image, create_view, subresource_range
from .memory import Buffer

FORMATS = {"rgba8": (vk.VK_FORMAT_R8G8B8A8_UNORM, 4), "alpha8": (vk.VK_FORMAT_R8_UNORM, 1)}
MAX_SIZE = 16384
_ids = itertools.count(1)

_SHADER_READ = vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL
_TRANSFER_DST = vk.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL
_UNDEFINED = vk.VK_IMAGE_LAYOUT_UNDEFINED


class Texture:
    """A sampled 2-D texture. States: live → closed (a second ``close`` does nothing).

    Parameters
    ----------
    device : Device
        Borrowed; must outlive the texture.
    width, height : int
        Texels, 1..16384.
    format : {"rgba8", "alpha8"}
        RGBA bytes, or one alpha byte per texel (sampled as white with that alpha).
    filter : {"linear", "nearest"}
        Sampling filter for magnification and minification. ``"nearest"``
        shows an image drawn at 1:1 (or integer zoom) with its exact bytes.
    pixels : ndarray, optional
        Initial contents, ``(height, width, 4)`` (rgba8) or ``(height, width)``
        (alpha8) uint8; zeros when omitted.

    Attributes
    ----------
    id : int
        Unique in the process and never 0; for a UI library's texture handles.
    """

    def __init__(self, device: Device, width: int, height: int, format: str = "rgba8",
                 filter: str = "linear", pixels: np.ndarray | None = None):
        if format not in FORMATS:
            raise ValueError(f"unknown texture format {format!r}; use one of {sorted(FORMATS)}")
        if filter not in FILTERS:
            raise ValueError(f"unknown texture filter {filter!r}; use one of {sorted(FILTERS)}")
        if not (1 <= width <= MAX_SIZE and 1 <= height <= MAX_SIZE):
            raise ValueError(f"texture size must be 1..{MAX_SIZE} px per side, got {width}x{height}")
        self.device = device
        self.width, self.height = int(width), int(height)
        self.format, self.filter = format, filter
        self.vk_format, self.texel_bytes = FORMATS[format]
        self.id = next(_ids)
        self.source = None  # the linked engine image, if any
        self.version = 0  # counts update() calls: what a retained overlay region drew is keyed by it
        self._initialized = False  # a full upload or copy has been recorded
        self._link_structs = None  # record_links's barriers and copy region, made once per link
        self._pending: list[tuple[np.ndarray, int, int, int, int]] = []  # (bytes, x, y, w, h)
        pipeline = overlay_pipeline(device)
        dev = device.handle
        self.handle, self.memory, self._allocated = create_image(
            device, self.width, self.height, self.vk_format,
            vk.VK_IMAGE_USAGE_SAMPLED_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
        swizzle = vk.VK_COMPONENT_SWIZZLE_IDENTITY
        components = new("VkComponentMapping", r=swizzle, g=swizzle, b=swizzle, a=swizzle)
        if format == "alpha8":
            one = vk.VK_COMPONENT_SWIZZLE_ONE
            components = new("VkComponentMapping", r=one, g=one, b=one, a=vk.VK_COMPONENT_SWIZZLE_R)
        self.view = create_view(device, self.handle, self.vk_format, components)
        size = new("VkDescriptorPoolSize", type=vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                   descriptorCount=1)
        self._pool = vk.vkCreateDescriptorPool(dev, new(
            "VkDescriptorPoolCreateInfo", maxSets=1, poolSizeCount=1, pPoolSizes=[size]), None)
        self.descriptor_set = vk.vkAllocateDescriptorSets(dev, new(
            "VkDescriptorSetAllocateInfo", descriptorPool=self._pool, descriptorSetCount=1,
            pSetLayouts=[pipeline.set_layout]))[0]
        info = new("VkDescriptorImageInfo", sampler=pipeline.samplers[filter], imageView=self.view,
                   imageLayout=_SHADER_READ)
        write = new("VkWriteDescriptorSet", dstSet=self.descriptor_set, dstBinding=0, descriptorCount=1,
                    descriptorType=vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, pImageInfo=info)
        vk.vkUpdateDescriptorSets(dev, 1, write, 0, None)
        shape = (self.height, self.width, self.texel_bytes)
        self.update(np.zeros(shape, np.uint8) if pixels is None else pixels)

    @property
    def shape(self) -> tuple[int, ...]:
        """The array shape :meth:`update` takes for the whole texture."""
        return (self.height, self.width, 4) if self.texel_bytes == 4 else (self.height, self.width)

    def update(self, pixels: np.ndarray, x: int = 0, y: int = 0) -> None:
        """Queue ``pixels`` for the rectangle at ``(x, y)``; shown from the next frame that draws it.

        ``pixels`` is ``(h, w, 4)`` uint8 for rgba8 (``(h, w)`` or ``(h, w, 1)``
        for alpha8). The bytes are copied now, so the caller may reuse the array.
        """
        self._check_live()
        if self.source is not None:
            raise ValueError("this texture is linked to an engine image; call unlink() before update()")
        self.version += 1
        a = np.asarray(pixels)
        if a.dtype != np.uint8:
            raise TypeError(f"texture pixels must be uint8, got {a.dtype} (convert with .astype(np.uint8))")
        if self.texel_bytes == 1 and a.ndim == 3 and a.shape[2] == 1:
            a = a[..., 0]
        want = "(h, w, 4)" if self.texel_bytes == 4 else "(h, w)"
        if (a.ndim, a.shape[2:]) != ((3, (4,)) if self.texel_bytes == 4 else (2, ())):
            raise ValueError(f"a {self.format} texture takes {want} uint8 pixels, got shape {a.shape}")
        h, w = a.shape[:2]
        x, y = int(x), int(y)
        if w == 0 or h == 0:
            return
        if x < 0 or y < 0 or x + w > self.width or y + h > self.height:
            raise ValueError(f"a {w}x{h} update at ({x}, {y}) does not fit the "
                             f"{self.width}x{self.height} texture")
        if w == self.width and h == self.height:
            self._pending.clear()  # everything queued so far is overwritten
        self._pending.append((np.ascontiguousarray(a).reshape(-1).copy(), x, y, w, h))

    def link(self, image) -> None:
        """Show engine ``image`` (an RGBA8 storage image of this size) from now on, copied each frame."""
        self._check_live()
        if self.format != "rgba8":
            raise ValueError("only rgba8 textures can be linked to an engine image")
        if getattr(image, "handle", None) is None:
            raise ValueError("the image to link is closed")
        if (image.width, image.height) != (self.width, self.height):
            raise ValueError(f"the image is {image.width}x{image.height} but the texture is "
                             f"{self.width}x{self.height}; make a texture of the image's size")
        self.source = image
        self._pending.clear()

    def unlink(self) -> None:
        """Stop copying the linked image; the texture keeps its last contents."""
        self.source = None

    @property
    def pending(self) -> bool:
        """True while queued uploads wait for a frame that draws the texture."""
        return bool(self._pending)

    def _check_live(self) -> None:
        if self.handle is None:
            raise ValueError(f"texture {self.id} is closed")

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, memory, view, pool = self.handle, self.memory, self.view, self._pool
        self.handle = self.memory = self.view = self._pool = self.descriptor_set = None
        self.source = None
        self._pending.clear()
        dev = self.device.handle
        device, size = self.device, self._allocated

        def destroy():
            vk.vkDestroyDescriptorPool(dev, pool, None)
            vk.vkDestroyImageView(dev, view, None)
            vk.vkDestroyImage(dev, handle, None)
            vk.vkFreeMemory(dev, memory, None)
            device.account(-size)

        self.device.retire(destroy)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- recording (used by overlay.Overlay) ---------------------------------------------------------
def record_uploads(recorder, textures) -> Buffer | None:
    """Record every queued upload of ``textures`` (one staging buffer); return the buffer.

    The caller submits the recording and then closes the buffer (its release is
    deferred until that submission has finished).
    """
    todo = [t for t in textures if t._pending]
    if not todo:
        return None
    for t in todo:
        whole = any(w == t.width and h == t.height for _, _, _, w, h in t._pending)
        if not t._initialized and not whole:  # (after unlink) never written: define every texel
            t._pending.insert(0, (np.zeros(t.width * t.height * t.texel_bytes, np.uint8), 0, 0,
                                  t.width, t.height))
    offsets, total = [], 0
    for t in todo:
        for data, *_ in t._pending:
            offsets.append(total)
            total += (data.size + 3) // 4 * 4  # keep every region 4-byte aligned
    staging = Buffer(recorder.device, total)
    k = 0
    for t in todo:
        regions = []
        for data, x, y, w, h in t._pending:
            staging.write(data, offsets[k])
            regions.append(new(
                "VkBufferImageCopy", bufferOffset=offsets[k], bufferRowLength=0, bufferImageHeight=0,
                imageSubresource=_layers(), imageOffset=new("VkOffset3D", x=x, y=y, z=0),
                imageExtent=new("VkExtent3D", width=w, height=h, depth=1)))
            k += 1
        old = _SHADER_READ if t._initialized else _UNDEFINED
        _transition(recorder, t.handle, old, _TRANSFER_DST)
        vk.vkCmdCopyBufferToImage(recorder.handle, staging.handle, t.handle, _TRANSFER_DST,
                                  len(regions), _array("VkBufferImageCopy", regions))
        _transition(recorder, t.handle, _TRANSFER_DST, _SHADER_READ)
        t._initialized = True
        t._pending.clear()
    return staging


def record_links(recorder, textures) -> None:
    """Record the per-frame copies of linked textures' images (before the render pass)."""
    linked = [t for t in textures if t.source is not None]
    if not linked:
        return
    for t in linked:
        src = t.source
        if src.handle is None:
            raise ValueError(f"texture {t.id} is linked to an image that was closed (a canvas replaced "
                             "by a new layout?); link() the new image")
        if src.layout != vk.VK_IMAGE_LAYOUT_GENERAL:
            raise ValueError(f"texture {t.id} is linked to an image that was never drawn; submit its "
                             "canvas once before drawing the texture")
    # Earlier compute/transfer/attachment writes to the sources (their frames) before the copies.
    lib, cb = vk.lib, recorder.handle  # the loader's entry points, with structs made once per link:
    # a dashboard frame links its canvases every frame (the vulkan package's conversions cost ~0.5 ms)
    global _LINK_BARRIER
    if _LINK_BARRIER is None:
        _LINK_BARRIER = new("VkMemoryBarrier",
                            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
                            | vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                            dstAccessMask=vk.VK_ACCESS_TRANSFER_READ_BIT)
    lib.vkCmdPipelineBarrier(
        cb, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        | vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
        _LINK_BARRIER, 0, ffi.NULL, 0, ffi.NULL)
    fragment, transfer = vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT
    for t in linked:
        key = (t.handle, t.source.handle, t.width, t.height)
        made = t._link_structs
        if made is None or made[0] != key:
            made = t._link_structs = (key, _barrier(t.handle, _UNDEFINED, _TRANSFER_DST), new(  # every
                "VkImageCopy", srcSubresource=_layers(), srcOffset=new("VkOffset3D"),  # texel is overwritten
                dstSubresource=_layers(), dstOffset=new("VkOffset3D"),
                extent=new("VkExtent3D", width=t.width, height=t.height, depth=1)),
                _barrier(t.handle, _TRANSFER_DST, _SHADER_READ))
        _, before, region, after = made
        lib.vkCmdPipelineBarrier(cb, fragment, transfer, 0, 0, ffi.NULL, 0, ffi.NULL, 1, before)
        lib.vkCmdCopyImage(cb, t.source.handle, vk.VK_IMAGE_LAYOUT_GENERAL, t.handle, _TRANSFER_DST, 1, region)
        lib.vkCmdPipelineBarrier(cb, transfer, fragment, 0, 0, ffi.NULL, 0, ffi.NULL, 1, after)
        t._initialized = True
        t._pending.clear()


_LINK_BARRIER = None  # record_links's memory barrier, made on first use


def _layers():
    return new("VkImageSubresourceLayers", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0,
               baseArrayLayer=0, layerCount=1)


def _array(ctype: str, structs):
    arr = ffi.new(f"{ctype}[]", len(structs))
    for i, s in enumerate(structs):
        arr[i] = s[0]
    return arr


def _transition(recorder, image, old: int, new_layout: int) -> None:
    """Layout transition of a texture between fragment-shader reads and transfer writes."""
    to_transfer = new_layout == _TRANSFER_DST
    src = vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT if to_transfer else vk.VK_PIPELINE_STAGE_TRANSFER_BIT
    dst = vk.VK_PIPELINE_STAGE_TRANSFER_BIT if to_transfer else vk.VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT
    vk.vkCmdPipelineBarrier(recorder.handle, src, dst, 0, 0, None, 0, None, 1, _barrier(image, old, new_layout))


def _barrier(image, old: int, new_layout: int):
    """The ``VkImageMemoryBarrier`` of a texture's transition between fragment-shader reads and
    transfer writes (stages: :func:`_transition`)."""
    to_transfer = new_layout == _TRANSFER_DST
    return new(
        "VkImageMemoryBarrier",
        srcAccessMask=0 if to_transfer else vk.VK_ACCESS_TRANSFER_WRITE_BIT,
        dstAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT if to_transfer else vk.VK_ACCESS_SHADER_READ_BIT,
        oldLayout=old, newLayout=new_layout,
        srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        image=image, subresourceRange=subresource_range())
