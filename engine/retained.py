"""Retained regions of an :class:`~.overlay.Overlay`: draw commands whose pixels are kept between
frames and copied back instead of rasterized again.

A UI frame mostly redraws what did not change: a dashboard panel's traces, fills, axes and
labels are the same frame after frame while only its cursor line moves. A
:class:`~.overlay.DrawList` marked with :class:`Retain` splits into a *static* part (its first
``commands`` commands, which use its first ``vertices`` vertices) and a *dynamic* part drawn
over it. The overlay keeps, per ``key``, the static part's exact inputs (vertex and index
bytes, named where the overlay's buffers hold them, clip rectangles, textures and their
versions, the target's size and clear colour); its pixels (the region: the union of its
scissor rectangles) stay in the target. A frame whose static part is byte-for-byte the kept
one, in a region the last submitted frame held at the same place, leaves them there instead
of drawing it (a copy restores what was drawn over them, below); any difference, however
small, draws it again. So a kept region is never stale, whatever made it change (new data, a
zoom, a hover highlight, a new glyph in the font atlas).

The frame is recorded in two render passes. Pass 1 clears the target (when regions are kept:
loads it and clears only what lies outside them, ``regions.outside``) and draws every list
before the first retained one, whole, and the static parts of the retained lists not kept;
then the copies below; pass 2 (the target loaded) draws the dynamic parts and every other list, in
order. Compared with drawing all lists in
order this moves a static part ahead of the lists between it and the first retained list, so
it is exact when, as the contract requires, **a retained list's static commands own their
pixels**: no list drawn after the first retained one and before this one draws under them
(Dear ImGui child windows side by side satisfy it; a tooltip, drawn last, does not need to).
Pixels then equal those of the plain frame byte for byte (the tests compare whole frames).

Only what is drawn over a region is stored (a save-under, ``vkCmdCopyImage``: no shading, no
blending). Between the passes each region's static pixels under what this frame's second pass
draws over it (a cursor line, a hover: the bounding box of those lists' vertices, a pixel
wider) are saved into one of its two small stores, and the next frame, keeping the region,
copies them back from it before saving its own into the other (at 2400x1400 a dashboard keeps
2 MB of strips where whole images of its panels took 9 MB). The same recording submitted again
first copies back what it saved (``record_undo``): its saves and pixels are the first ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import vulkan as vk

from ._vk import ffi, new
from .graphics import TARGET_FORMAT
from .image import create_image
from .regions import covered, drawn_over, scissor

_GENERAL = vk.VK_IMAGE_LAYOUT_GENERAL


@dataclass(frozen=True)
class Retain:
    """Marks a draw list's static part: its first ``commands`` commands, which read its first
    ``vertices`` vertices and draw nothing outside ``bounds`` (``(x0, y0, x1, y1)``, display
    units); no other list drawn before them in the frame may draw inside ``bounds``. ``key``
    names the region from frame to frame (a panel's identity).

    ``tag`` (optional, comparable) names what the caller drew the static part from (its
    inputs); it is kept with the pixels once a submitted frame's static part equalled the kept
    one byte for byte (:meth:`RetainedRegions.holds`). ``reuse=True`` then stands for the static
    part without building it: its commands (if any) are neither drawn nor compared, and the
    pixels kept under ``tag`` are copied in; the caller checks ``holds(key, tag)`` first."""

    key: object
    commands: int
    vertices: int
    bounds: tuple[float, float, float, float]
    tag: object = None
    reuse: bool = False


class _Store:
    """An image holding the static pixels of one rectangle of a kept region (its top left at 0, 0):
    made as small as the rectangles saved in it, and grown when one does not fit."""

    def __init__(self, device, width: int, height: int):
        self.device = device
        self.width, self.height = width, height
        self.handle, self.memory, self._allocated = create_image(
            device, width, height, TARGET_FORMAT, vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
            | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
        self.fresh = True  # its layout is still UNDEFINED

    def close(self) -> None:
        if self.handle is None:
            return
        dev, device, handle, memory, size = self.device.handle, self.device, self.handle, self.memory, \
            self._allocated
        self.handle = self.memory = None

        def destroy():
            vk.vkDestroyImage(dev, handle, None)
            vk.vkFreeMemory(dev, memory, None)
            device.account(-size)

        self.device.retire(destroy)


class _Kept:
    """One key's region: the inputs its static pixels were drawn from and, in two stores used in
    turn, the static pixels under what the last frames drew over it (see the module)."""

    def __init__(self, device, rect):
        self.device = device
        self.rect = rect
        self.stores: list = [None, None]
        self.saved: list = [None, None]  # the target rectangle each store holds, once submitted
        self.turn = 0  # the store the next frame saves into (the other holds the last frame's)
        self.signature = None  # what its pixels were drawn from, once a submitted frame made them
        self.tag = None  # the caller's inputs that drew them, confirmed (see RetainedRegions.holds)
        self.last_tag = None  # the tag of the last submitted frame that drew or compared them
        self.held = None  # (commit, rect) of the last submitted frame that held it (RetainedRegions)

    def store(self, rect) -> _Store:
        """The store this frame saves ``rect`` into, grown to hold it."""
        store = self.stores[self.turn]
        if store is None or store.width < rect[2] or store.height < rect[3]:
            old = (store.width, store.height) if store else (0, 0)
            if store is not None:
                store.close()
            store = self.stores[self.turn] = _Store(self.device, max(rect[2], old[0]), max(rect[3], old[1]))
        return store

    def close(self) -> None:
        for store in self.stores:
            if store is not None:
                store.close()
        self.stores = [None, None]


class RetainedRegions:
    """The kept regions of one overlay (made and owned by it). ``plan`` decides, per frame,
    which retained lists are drawn and which are copied; ``commit`` (at submit) makes the
    regions a submitted frame drew available to later frames."""

    def __init__(self, device):
        self.device = device
        self._kept: dict = {}
        self._barriers = None  # the copies' memory barriers, made on first use
        self.hits = self.misses = 0  # over the overlay's life (tests and benchmarks read them)
        self.reused = 0  # of the hits, the static parts not built at all (Retain.reuse)
        self.kept_pixels = 0  # the kept regions' pixels, and of them those copied back into the
        self.restored_pixels = 0  # target (the rest was still there: see plan's restore)
        self._commits = 0  # submitted frames' plans
        self._undo: list = []  # (store, rect) the last submitted frame saved (see record_undo)

    def holds(self, key, tag) -> bool:
        """Whether the pixels kept under ``key`` were drawn from ``tag`` and confirmed by a
        second submitted frame drawn from the same inputs, and the last submitted frame held
        them (so a :class:`Retain` with ``reuse=True`` can stand for them)."""
        entry = self._kept.get(key)
        return entry is not None and entry.tag is not None and entry.tag == tag and self._held(entry)

    def _held(self, entry, rect=None) -> bool:
        """Whether the last submitted frame held ``entry`` (at ``rect``, default its own): the
        target still has its static pixels but under what that frame drew over it."""
        return entry.held == (self._commits, entry.rect if rect is None else rect)

    def plan(self, lists, geometry, transform, size, clear, index_size: int, slot=None, offsets=()):
        """Per list: None (drawn whole), or ``(split, entry, signature, kept, tag, restore, save)``
        for a retained one: its static commands are ``commands[:split]``, ``kept`` says whether
        its pixels are kept (``signature`` None: reused, see :class:`Retain`). Lists whose
        static part cannot be kept this frame (a linked texture, which changes without a
        version) are drawn whole. A region is kept only while the last submitted frame held it
        at the same place and drew it from the same bytes.

        ``restore`` (kept regions): the pixel rectangle the last frame drew over, copied back in
        from the store it saved it to, or None. ``save``: the rectangle this frame's second pass
        draws over, saved to the other store before it does, or None.

        ``slot`` (with ``generation``, ``vertices`` and ``indices`` host-visible buffers) is where
        this frame's geometry is written next, list ``n`` at ``offsets[n]`` (vertex and index
        byte offsets): a kept signature names those bytes instead of holding a copy of them, and
        is equal only while no later draw wrote over them (a static part not built for a while
        is drawn again when next built)."""
        out, seen = [], set()
        for d, (v, i) in zip(lists, geometry, strict=True):
            r = getattr(d, "retain", None)
            if r is not None and r.reuse and r.key not in seen:
                entry = self._kept.get(r.key)
                if not self.holds(r.key, r.tag) or entry.signature[0][:3] != (tuple(size), tuple(clear),
                                                                             tuple(transform)):
                    raise ValueError(f"draw list {r.key!r} reuses pixels not kept for its tag: check "
                                     "RetainedRegions.holds(key, tag) before building a reusing list")
                seen.add(r.key)
                out.append((r.commands, entry, None, True, r.tag))
                continue
            sig = None if r is None or r.key in seen else _signature(d, r, v, i, transform, size, clear,
                                                                    index_size)
            if sig is None:
                out.append(None)
                continue
            seen.add(r.key)
            rect, head, static_v, static_i = sig
            entry = self._kept.get(r.key)
            if entry is None:
                entry = self._kept[r.key] = _Kept(self.device, rect)
            old = entry.signature
            kept = old is not None and self._held(entry, rect) and old[0] == head \
                and _still(old[1], static_v, static_i)
            entry.rect = rect
            at = offsets[len(out)] if slot is not None else None  # where this frame writes them
            sig = (head, None if at is None else (slot, slot.generation + 1, at[0], at[1]))
            out.append((r.commands, entry, sig, kept, r.tag))
        for key in [k for k in self._kept if k not in seen]:  # a region no longer drawn
            self._kept.pop(key).close()
        if all(p is None for p in out):
            return None
        first = next(n for n, p in enumerate(out) if p is not None)
        plan = out
        saves = covered([p[1].rect if p is not None else None for p in plan],
                         drawn_over(lists, geometry, out, first, transform, size, index_size))
        for n, p in enumerate(plan):
            if p is not None:
                entry = p[1]
                last = entry.saved[1 - entry.turn] if p[3] else None
                plan[n] = (*p, last, saves[n])
        return plan

    def commit(self, plan, again: bool = False) -> None:
        """The frame recorded with ``plan`` was submitted: its regions are kept, and what it
        saved. ``again``: the last submitted recording was submitted again (after
        :meth:`record_undo`): the target is as it left it, nothing changes."""
        if again:
            return
        self._commits += 1
        self._undo = []
        for p in plan or ():
            if p is None:
                continue
            _, entry, sig, kept, tag, restore, save = p
            entry.held = (self._commits, entry.rect)
            entry.saved[entry.turn] = save
            if save is not None:
                self._undo.append((entry.stores[entry.turn], save))
            entry.turn = 1 - entry.turn
            if kept:
                self.kept_pixels += entry.rect[2] * entry.rect[3]
            if restore is not None:
                self.restored_pixels += restore[2] * restore[3]
            self.hits += kept
            self.misses += not kept
            if sig is None:  # reused: its pixels and tag stay
                self.reused += 1
                continue
            # a tag is trusted once the same inputs drew the same static part twice in a row
            entry.tag = tag if kept and tag is not None and entry.last_tag == tag else None
            entry.last_tag = tag
            entry.signature = sig

    def record_copies(self, cb, target, plan) -> None:
        """Between the passes: copy back in what the last frame drew over the kept regions, then
        save what this frame's second pass will draw over. Recorded through the loader's entry
        points (a frame copies a dozen rectangles: the vulkan package's argument conversion
        cost more than the commands)."""
        copies = [(p[1], p[5], p[6]) for p in plan if p is not None]
        for entry, _, save in copies:  # this frame's stores (made or grown first)
            if save is not None:
                entry.store(save)
        stores = [e.stores[e.turn] for e, _, save in copies if save is not None]
        self._barrier(cb, [s for s in stores if s.fresh])
        for s in stores:
            s.fresh = False
        for entry, restore, _ in copies:
            if restore is not None:
                _copy(cb, entry.stores[1 - entry.turn], target, restore, True)
        self._barrier(cb, ())  # what was restored is read by the saves
        for entry, _, save in copies:
            if save is not None:
                _copy(cb, entry.stores[entry.turn], target, save, False)
        self._barrier(cb, None)

    def record_undo(self, cb, target) -> bool:
        """Before the last submitted frame's recording is submitted again: copy back the static
        pixels it saved (its second pass drew over them), so that its copies save them again
        and its pixels come out the same. False when it saved nothing."""
        if not self._undo:
            return False
        self._barrier(cb, ())
        for store, rect in self._undo:
            _copy(cb, store, target, rect, True)
        self._barrier(cb, None)
        return True

    def _barrier(self, cb, fresh) -> None:
        """A barrier before transfers (``fresh``: stores to move out of UNDEFINED), or after
        them before the render pass (``fresh`` None)."""
        lib = vk.lib
        if self._barriers is None:
            stages = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
            self._barriers = (stages, new(
                "VkMemoryBarrier", srcAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT
                | vk.VK_ACCESS_TRANSFER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT,
                dstAccessMask=vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT), new(
                "VkMemoryBarrier", srcAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                dstAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_READ_BIT | vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT))
        stages, before, after = self._barriers
        if fresh is None:
            lib.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                     vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, 0, 1, after, 0, ffi.NULL,
                                     0, ffi.NULL)
            return
        images = ffi.new("VkImageMemoryBarrier[]", len(fresh)) if fresh else ffi.NULL
        for k, s in enumerate(fresh):
            images[k] = new("VkImageMemoryBarrier", dstAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                            oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED, newLayout=_GENERAL,
                            srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                            dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=s.handle,
                            subresourceRange=_range())[0]
        lib.vkCmdPipelineBarrier(cb, stages, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, before, 0, ffi.NULL,
                                 len(fresh), images)

    def close(self) -> None:
        for entry in self._kept.values():
            entry.close()
        self._kept.clear()
        self._undo = []


def _signature(d, r: Retain, v: np.ndarray, i: np.ndarray, transform, size, clear, index_size: int):
    """``(pixel rectangle, signature head, static vertex bytes, static index bytes)`` of a retained
    list's static part (the bytes as views of this frame's geometry), or None when it cannot be
    kept (no commands, a linked texture, a split that cuts a command's indices). A kept
    signature is the head and where the frame wrote those bytes (see ``RetainedRegions.plan``)."""
    from .graphics import VERTEX_DTYPE

    static = d.commands[:r.commands]
    rects, meta, end = [], [], 0
    for c in static:
        if c.index_count <= 0:
            continue
        if c.texture.source is not None:
            return None
        s = scissor(c.clip, transform, *size)
        if s is None:
            continue
        rects.append(s)
        meta.append((c.texture.id, c.texture.version, s, c.index_offset, c.index_count, c.vertex_offset))
        end = max(end, c.index_offset + c.index_count)
    if not rects or any(c.index_offset < end for c in d.commands[r.commands:] if c.index_count > 0):
        return None
    ox, oy, fx, fy = transform  # the bounds in whole pixels, clamped to the target
    bx0, by0 = max(math.floor((r.bounds[0] - ox) * fx), 0), max(math.floor((r.bounds[1] - oy) * fy), 0)
    bx1 = min(math.ceil((r.bounds[2] - ox) * fx), size[0])
    by1 = min(math.ceil((r.bounds[3] - oy) * fy), size[1])
    x0, y0 = max(bx0, min(s[0] for s in rects)), max(by0, min(s[1] for s in rects))
    x1, y1 = min(bx1, max(s[0] + s[2] for s in rects)), min(by1, max(s[1] + s[3] for s in rects))
    if x1 <= x0 or y1 <= y0:
        return None
    nv = r.vertices * VERTEX_DTYPE.itemsize
    return (x0, y0, x1 - x0, y1 - y0), (tuple(size), tuple(clear), tuple(transform), tuple(meta)), \
        v[:nv], i[:end * index_size]


_COMPARE_BYTES = 1 << 16


def _still(ref, vertices: np.ndarray, indices: np.ndarray) -> bool:
    """Whether the bytes a kept signature names (``(slot, generation, vertex offset, index
    offset)``, see ``RetainedRegions.plan``) are still there, unwritten since, and equal to
    ``vertices`` and ``indices`` (uint8 views), compared a block at a time."""
    if ref is None:
        return False
    slot, generation, v_at, i_at = ref
    if slot.generation != generation or slot.vertices is None or slot.indices is None:
        return False
    for kept, now in ((slot.vertices.array[v_at:v_at + vertices.size], vertices),
                      (slot.indices.array[i_at:i_at + indices.size], indices)):
        if kept.size != now.size or not all(kept[k:k + _COMPARE_BYTES].tobytes() == now[k:k + _COMPARE_BYTES]
                                            .tobytes() for k in range(0, now.size, _COMPARE_BYTES)):
            return False
    return True


def _range():
    return new("VkImageSubresourceRange", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
               levelCount=1, baseArrayLayer=0, layerCount=1)


def _copy(cb, store: _Store, target, rect, into: bool) -> None:
    """Copy ``rect`` of the target into the store's corner, or (``into``) back from it."""
    copy = ffi.new("VkImageCopy*")
    for layers in (copy.srcSubresource, copy.dstSubresource):
        layers.aspectMask, layers.layerCount = vk.VK_IMAGE_ASPECT_COLOR_BIT, 1
    at = copy.dstOffset if into else copy.srcOffset
    at.x, at.y = rect[0], rect[1]
    copy.extent.width, copy.extent.height, copy.extent.depth = rect[2], rect[3], 1
    src, dst = (store.handle, target.handle) if into else (target.handle, store.handle)
    vk.lib.vkCmdCopyImage(cb, src, _GENERAL, dst, _GENERAL, 1, copy)
