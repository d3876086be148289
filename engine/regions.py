"""Rectangles of the overlay's target for :mod:`.retained`: clip rectangles as pixels, the part
of the target outside the kept regions (cleared), and what a frame's second pass draws over
them (saved and restored). Pure geometry over draw lists; no Vulkan objects but the clear."""

from __future__ import annotations

import itertools
import math

import numpy as np
import vulkan as vk

from ._vk import ffi


def scissor(clip, transform, width: int, height: int):
    """A clip rectangle in display units as integer target pixels ``(x, y, w, h)``, clamped to
    the target (Dear ImGui's reference backends' rule); None when empty."""
    ox, oy, fx, fy = transform
    x0, y0 = max((clip[0] - ox) * fx, 0.0), max((clip[1] - oy) * fy, 0.0)
    x1, y1 = min((clip[2] - ox) * fx, width), min((clip[3] - oy) * fy, height)
    if x1 <= x0 or y1 <= y0:
        return None
    return int(x0), int(y0), int(x1 - x0), int(y1 - y0)


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


def drawn_over(lists, geometry, plan, first, transform, size, index_size: int) -> np.ndarray:
    """Where the second pass draws: ``(n, 4)`` pixel boxes ``x0, y0, x1, y1``, one per list: what a
    kept region has drawn over it this frame. A list drawn whole, or a retained list's dynamic
    part, is boxed by its commands' scissors cut to the bounding box of the vertices its indices
    name, a pixel wider on each side (a cursor line in a plot-wide scissor; a child window whose
    commands clip to its parent's rectangle). A few operations per list: this runs every frame."""
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
        spans: dict = {}  # cut to the vertices the commands' indices name: per vertex offset (one
        for c in commands:  # unless 16-bit indices overflowed), the span of their indices
            a, b = spans.get(c.vertex_offset, (c.index_offset, c.index_offset + c.index_count))
            spans[c.vertex_offset] = (min(a, c.index_offset), max(b, c.index_offset + c.index_count))
        index, lo, hi = i.view(itype), math.inf, -1
        for offset, (a, b) in spans.items():
            if b > a:
                lo, hi = min(lo, int(index[a:b].min()) + offset), max(hi, int(index[a:b].max()) + offset)
        position = v.view(np.float32).reshape(-1, VERTEX_DTYPE.itemsize // 4)
        if hi < 0 or lo >= len(position):
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


def covered(rects, boxes: np.ndarray) -> list:
    """Per region ``(x, y, w, h)`` (None: none): the bounding box of the ``(n, 4)`` boxes
    ``x0, y0, x1, y1`` inside it, clipped to it, or None when none reaches into it (all regions
    against all boxes in one numpy expression: this runs every frame)."""
    out = [None] * len(rects)
    at = [n for n, r in enumerate(rects) if r is not None]
    if not at or not len(boxes):
        return out
    regions = np.array([rects[n] for n in at], np.int64)
    regions[:, 2:] += regions[:, :2]
    lo = np.maximum(boxes[None, :, :2], regions[:, None, :2])  # (regions, boxes, 2)
    hi = np.minimum(boxes[None, :, 2:], regions[:, None, 2:])
    hit = (lo < hi).all(2)
    big = np.iinfo(np.int64).max
    x0y0 = np.where(hit[..., None], lo, big).min(1)
    x1y1 = np.where(hit[..., None], hi, -big).max(1)
    for k, n in enumerate(at):
        if hit[k].any():
            (x0, y0), (x1, y1) = x0y0[k].tolist(), x1y1[k].tolist()
            out[n] = (x0, y0, x1 - x0, y1 - y0)
    return out
