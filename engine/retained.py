"""Retained regions of an :class:`~.overlay.Overlay`: draw commands whose pixels are kept between
frames and copied back instead of rasterized again.

A UI frame mostly redraws what did not change: a dashboard panel's traces, fills, axes and
labels are the same frame after frame while only its cursor line moves. A
:class:`~.overlay.DrawList` marked with :class:`Retain` splits into a *static* part (its first
``commands`` commands, which use its first ``vertices`` vertices) and a *dynamic* part drawn
over it. The overlay keeps, per ``key``, the static part's exact inputs (vertex and index
bytes, clip rectangles, textures and their versions, the target's size and clear colour) and
the pixels it produced inside the union of its scissor rectangles. A frame whose static part
is byte-for-byte the kept one copies those pixels into the target (``vkCmdCopyImage``: no
shading, no blending) instead of drawing it; any difference, however small, draws it again
and keeps the new pixels. So a kept region is never stale, whatever made it change (new
data, a zoom, a hover highlight, a new glyph in the font atlas).

The frame is recorded in two render passes. Pass 1 clears the target (when regions are copied
in: loads it and clears only what lies outside them, :func:`outside`) and draws every list
before the first retained one, whole, and the static parts of the retained lists not kept;
then the new regions are copied out and the kept ones copied in; pass 2 (the target loaded)
draws the dynamic parts and every other list, in order. Compared with drawing all lists in
order this moves a static part ahead of the lists between it and the first retained list, so
it is exact when, as the contract requires, **a retained list's static commands own their
pixels**: no list drawn after the first retained one and before this one draws under them
(Dear ImGui child windows side by side satisfy it; a tooltip, drawn last, does not need to).
Pixels then equal those of the plain frame byte for byte (the tests compare whole frames).

A kept region is copied back in only where it may differ. The target keeps its pixels from
frame to frame, so a region the last submitted frame held is still there except where that
frame's second pass drew over it (a cursor line, a hover): the copy is the bounding box of
that and of what this frame's second pass draws over it (so the same recording submitted
again is exact too); any other region (new, moved, last held earlier) is copied whole.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import vulkan as vk

from ._vk import ffi, new
from .graphics import TARGET_FORMAT
from .image import create_image

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


def scissor(clip, transform, width: int, height: int):
    """A clip rectangle in display units as integer target pixels ``(x, y, w, h)``, clamped to
    the target (Dear ImGui's reference backends' rule); None when empty."""
    ox, oy, fx, fy = transform
    x0, y0 = max((clip[0] - ox) * fx, 0.0), max((clip[1] - oy) * fy, 0.0)
    x1, y1 = min((clip[2] - ox) * fx, width), min((clip[3] - oy) * fy, height)
    if x1 <= x0 or y1 <= y0:
        return None
    return int(x0), int(y0), int(x1 - x0), int(y1 - y0)


class _Kept:
    """One key's pixels (an image of its region's size) and the inputs that produced them."""

    def __init__(self, device, rect):
        self.device = device
        self.rect = rect
        self.handle, self.memory, self._allocated = create_image(
            device, rect[2], rect[3], TARGET_FORMAT,
            vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT | vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT)
        self.signature = None  # what its pixels were drawn from, once a submitted frame made them
        self.tag = None  # the caller's inputs that drew them, confirmed (see RetainedRegions.holds)
        self.last_tag = None  # the tag of the last submitted frame that drew or compared them
        self.fresh = True  # its layout is still UNDEFINED
        self.held = None  # (commit, rect) of the last submitted frame that held it (RetainedRegions)
        self._regions: dict = {}  # (rect, kept) -> its VkImageCopy (into or out of the target)

    def region(self, kept: bool):
        """The ``VkImageCopy`` of this region into the target (``kept``) or out of it."""
        key = (self.rect, kept)
        region = self._regions.get(key)
        if region is None:
            if len(self._regions) > 8:  # a region that moves about: no cache to grow
                self._regions.clear()
            x, y, w, h = self.rect
            at, zero = new("VkOffset3D", x=x, y=y, z=0), new("VkOffset3D", x=0, y=0, z=0)
            region = self._regions[key] = new(
                "VkImageCopy", srcSubresource=_layers(), srcOffset=zero if kept else at,
                dstSubresource=_layers(), dstOffset=at if kept else zero,
                extent=new("VkExtent3D", width=w, height=h, depth=1))
        return region

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
        self._dirty = None  # what the last submitted frame drew over its regions (pixel rects)

    def holds(self, key, tag) -> bool:
        """Whether the pixels kept under ``key`` were drawn from ``tag`` and confirmed by a
        second submitted frame drawn from the same inputs (so a :class:`Retain` with
        ``reuse=True`` can stand for them)."""
        entry = self._kept.get(key)
        return entry is not None and entry.tag is not None and entry.tag == tag

    def plan(self, lists, geometry, transform, size, clear, index_size: int):
        """Per list: None (drawn whole), or ``(split, entry, signature, kept, tag, restore)`` for
        a retained one: its static commands are ``commands[:split]``, ``kept`` says whether its
        pixels are copied in (``signature`` None: reused, see :class:`Retain`). Lists whose
        static part cannot be kept this frame (a linked texture, which changes without a
        version) are drawn whole.

        ``restore`` (kept regions): the pixel rectangle copied back in, or None for none. The
        target still holds a region the last submitted frame held, except where that frame
        drew over it (its cursor line, a hover): only that part, and the part this frame draws
        over (so that submitting it again is exact), is copied back; else the whole region."""
        out, seen = [], set()
        for d, (v, i) in zip(lists, geometry, strict=True):
            r = getattr(d, "retain", None)
            if r is not None and r.reuse and r.key not in seen:
                entry = self._kept.get(r.key)
                if not self.holds(r.key, r.tag) or entry.signature[:3] != (tuple(size), tuple(clear),
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
            if entry is not None and entry.rect[2:] != rect[2:]:
                entry.close()
                entry = None
            if entry is None:
                entry = self._kept[r.key] = _Kept(self.device, rect)
            entry.rect = rect
            old = entry.signature
            kept = old is not None and old[:4] == head and _same_bytes(old[4], static_v) \
                and _same_bytes(old[5], static_i)
            # the kept signature again when equal: the static part's bytes are copied only when new
            sig = old if kept else (*head, static_v.tobytes(), static_i.tobytes())
            out.append((r.commands, entry, sig, kept, r.tag))
        for key in [k for k in self._kept if k not in seen]:  # a region no longer drawn
            self._kept.pop(key).close()
        if all(p is None for p in out):
            return None
        first = next(n for n, p in enumerate(out) if p is not None)
        plan = _Plan(out)
        plan.dirty = _drawn_over(lists, geometry, out, first, transform, size, index_size)
        restores = self._restores([p[1] if p is not None and p[3] else None for p in plan], plan.dirty)
        for n, p in enumerate(plan):
            if p is not None:
                plan[n] = (*p, restores[n])
        return plan

    def _restores(self, entries, dirty: np.ndarray) -> list:
        """Per kept region (None elsewhere): what must be copied back in. All of it unless the
        last submitted frame held it; then the bounding box of what that frame and this one draw
        over it, or None. (All regions against all boxes in one numpy expression.)"""
        out = [None if e is None else e.rect for e in entries]
        held = [n for n, e in enumerate(entries) if e is not None and e.held == (self._commits, e.rect)]
        if not held or self._dirty is None:
            return out
        rects = np.array([entries[n].rect for n in held], np.int64)
        rects[:, 2:] += rects[:, :2]
        boxes = np.concatenate([self._dirty, dirty])
        lo = np.maximum(boxes[None, :, :2], rects[:, None, :2])  # (regions, boxes, 2)
        hi = np.minimum(boxes[None, :, 2:], rects[:, None, 2:])
        hit = (lo < hi).all(2)
        big = np.iinfo(np.int64).max
        x0y0 = np.where(hit[..., None], lo, big).min(1)
        x1y1 = np.where(hit[..., None], hi, -big).max(1)
        for k, n in enumerate(held):
            if hit[k].any():
                (x0, y0), (x1, y1) = x0y0[k].tolist(), x1y1[k].tolist()
                out[n] = (x0, y0, x1 - x0, y1 - y0)
            else:
                out[n] = None
        return out

    def commit(self, plan) -> None:
        """The frame recorded with ``plan`` was submitted: its new regions are kept."""
        self._commits += 1
        self._dirty = getattr(plan, "dirty", None)
        for p in plan or ():
            if p is None:
                continue
            _, entry, sig, kept, tag, restore = p
            entry.held = (self._commits, entry.rect)
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
        """Between the passes: copy the newly drawn regions out of the target, the kept ones in.
        Recorded through the loader's entry points with structs made once per region (a
        frame copies a dozen regions: the vulkan package's argument conversion cost more than
        the commands)."""
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
        fresh = [p[1] for p in plan if p is not None and p[1].fresh]
        images = [new("VkImageMemoryBarrier", srcAccessMask=0, dstAccessMask=vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                      oldLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED, newLayout=_GENERAL,
                      srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
                      dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=e.handle,
                      subresourceRange=_range()) for e in fresh]
        for e in fresh:
            e.fresh = False
        barriers = ffi.new("VkImageMemoryBarrier[]", len(images)) if images else ffi.NULL
        for k, b in enumerate(images):
            barriers[k] = b[0]
        lib.vkCmdPipelineBarrier(cb, stages, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, before, 0, ffi.NULL,
                                 len(images), barriers)
        for p in plan:
            if p is None:
                continue
            entry, kept, restore = p[1], p[3], p[5]
            if not kept:
                lib.vkCmdCopyImage(cb, target.handle, _GENERAL, entry.handle, _GENERAL, 1, entry.region(False))
            elif restore == entry.rect:
                lib.vkCmdCopyImage(cb, entry.handle, _GENERAL, target.handle, _GENERAL, 1, entry.region(True))
            elif restore is not None:
                lib.vkCmdCopyImage(cb, entry.handle, _GENERAL, target.handle, _GENERAL, 1,
                                   _part(entry.rect, restore))
        lib.vkCmdPipelineBarrier(cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT, 0, 1, after, 0, ffi.NULL, 0,
                                 ffi.NULL)

    def close(self) -> None:
        for entry in self._kept.values():
            entry.close()
        self._kept.clear()


def _signature(d, r: Retain, v: np.ndarray, i: np.ndarray, transform, size, clear, index_size: int):
    """``(pixel rectangle, signature head, static vertex bytes, static index bytes)`` of a retained
    list's static part (the bytes as views of this frame's geometry), or None when it cannot be
    kept (no commands, a linked texture, a split that cuts a command's indices). A kept
    signature is the head and those bytes, copied."""
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


def _same_bytes(kept: bytes, now: np.ndarray) -> bool:
    """Whether the uint8 view ``now`` holds exactly the bytes ``kept``, compared a block at a time
    (no copy of a static part's megabytes of vertices made only to be compared and dropped)."""
    if len(kept) != now.size:
        return False
    return all(now[k:k + _COMPARE_BYTES].tobytes() == kept[k:k + _COMPARE_BYTES]
               for k in range(0, len(kept), _COMPARE_BYTES))


def clear_outside(cb, clear, rects, width: int, height: int) -> None:
    """In a render pass that loaded the target: clear all of it but ``rects`` (the kept regions,
    copied in whole after the pass; on lavapipe a full clear first cost milliseconds)."""
    free = outside(rects, width, height)
    if not free:
        return
    att = ffi.new("VkClearAttachment[1]")
    att[0].aspectMask = vk.VK_IMAGE_ASPECT_COLOR_BIT
    att[0].colorAttachment = 0
    for i, c in enumerate(clear):
        att[0].clearValue.color.float32[i] = c / 255.0
    out = ffi.new("VkClearRect[]", len(free))
    for k, (x, y, w, h) in enumerate(free):
        out[k].rect.offset.x, out[k].rect.offset.y = x, y
        out[k].rect.extent.width, out[k].rect.extent.height = w, h
        out[k].baseArrayLayer, out[k].layerCount = 0, 1
    vk.lib.vkCmdClearAttachments(cb, 1, att, len(free), out)


def outside(rects, width: int, height: int) -> list[tuple[int, int, int, int]]:
    """The part of the ``width`` x ``height`` target outside ``rects`` (``(x, y, w, h)`` each,
    inside it), as disjoint rectangles: bands between the rectangles' top and bottom edges, and
    in each band the spans no rectangle covers (a band taller when the next has the same)."""
    ys = sorted({0, height, *(r[1] for r in rects), *(r[1] + r[3] for r in rects)})
    out, open_ = [], {}  # (x0, x1) -> (y0, index in out) of a span still growing downwards
    for y0, y1 in itertools.pairwise(ys):
        covered = sorted((r[0], r[0] + r[2]) for r in rects if r[1] <= y0 and r[1] + r[3] >= y1)
        spans, x = [], 0
        for a, b in covered:
            if a > x:
                spans.append((x, a))
            x = max(x, b)
        if x < width:
            spans.append((x, width))
        grown = {}
        for span in spans:
            if span in open_:
                start, k = open_[span]
                out[k] = (span[0], start, span[1] - span[0], y1 - start)
            else:
                start, k = y0, len(out)
                out.append((span[0], y0, span[1] - span[0], y1 - y0))
            grown[span] = (start, k)
        open_ = grown
    return out


def _layers():
    return new("VkImageSubresourceLayers", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0,
               baseArrayLayer=0, layerCount=1)


def _range():
    return new("VkImageSubresourceRange", aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
               levelCount=1, baseArrayLayer=0, layerCount=1)


class _Plan(list):
    """A frame's plan (see :meth:`RetainedRegions.plan`) and ``dirty``: the pixel rectangles its
    second pass draws into."""

    dirty: list


def _drawn_over(lists, geometry, plan, first, transform, size, index_size: int) -> np.ndarray:
    """Where the second pass draws: ``(n, 4)`` pixel boxes ``x0, y0, x1, y1``, one per list: what a
    kept region has drawn over it this frame. A list drawn whole is boxed by its commands'
    scissors (a child window's own rectangle); a retained list's dynamic part (a cursor line in a
    plot-wide scissor) also by the bounding box of the vertices its indices name, a pixel wider
    on each side. A few operations per list: this runs every frame."""
    from .graphics import VERTEX_DTYPE

    ox, oy, fx, fy = transform
    width, height = size
    itype = np.uint16 if index_size == 2 else np.uint32
    out = []
    for n in range(first, len(lists)):
        d, (v, i), p = lists[n], geometry[n], plan[n]
        commands = [c for c in (d.commands if p is None else d.commands[p[0]:]) if c.index_count > 0]
        rects = [r for r in (scissor(c.clip, transform, width, height) for c in commands) if r is not None]
        if not v.size or not rects:
            continue
        box = [min(r[0] for r in rects), min(r[1] for r in rects), max(r[0] + r[2] for r in rects),
               max(r[1] + r[3] for r in rects)]
        if p is not None:  # cut to the range of vertices the dynamic part's indices name
            index = i.view(itype)
            lo = hi = None
            for c in commands:
                used = index[c.index_offset:c.index_offset + c.index_count]
                if used.size:
                    a, b = int(used.min()) + c.vertex_offset, int(used.max()) + c.vertex_offset
                    lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
            position = v.view(np.float32).reshape(-1, VERTEX_DTYPE.itemsize // 4)
            if lo is None or lo >= len(position):
                continue  # (a bad index is draw()'s to report)
            xs, ys = position[lo:hi + 1, 0], position[lo:hi + 1, 1]  # a column at a time: a strided
            # 2-D reduce is 25 times slower
            box = [max(box[0], math.floor((float(xs.min()) - ox) * fx) - 1),
                   max(box[1], math.floor((float(ys.min()) - oy) * fy) - 1),
                   min(box[2], math.ceil((float(xs.max()) - ox) * fx) + 1),
                   min(box[3], math.ceil((float(ys.max()) - oy) * fy) + 1)]
        if box[0] < box[2] and box[1] < box[3]:
            out.append(box)
    return np.array(out, np.int64).reshape(-1, 4)


def _part(rect, part):
    """The ``VkImageCopy`` of ``part`` (target pixels) of a kept region at ``rect`` back into the
    target (made per frame: the part moves with the cursor)."""
    copy = ffi.new("VkImageCopy*")
    for layers in (copy.srcSubresource, copy.dstSubresource):
        layers.aspectMask, layers.layerCount = vk.VK_IMAGE_ASPECT_COLOR_BIT, 1
    copy.srcOffset.x, copy.srcOffset.y = part[0] - rect[0], part[1] - rect[1]
    copy.dstOffset.x, copy.dstOffset.y = part[0], part[1]
    copy.extent.width, copy.extent.height, copy.extent.depth = part[2], part[3], 1
    return copy
