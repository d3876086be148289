"""Overlay: an RGBA8 target that draws indexed, textured, alpha-blended 2-D triangle lists.

This is the renderer for UI chrome -- Dear ImGui windows, ImPlot axes and
legends -- drawn by the fixed-function pipeline of :mod:`.graphics`, outside
the byte-exact contract of the compute views. It knows nothing of imgui: it
takes :class:`DrawList`\\ s (vertex bytes in :data:`VERTEX_DTYPE` layout,
16- or 32-bit indices, and :class:`DrawCommand`\\ s naming a
:class:`~.texture.Texture`, a clip rectangle and an index range), which is
exactly the shape of Dear ImGui's ``ImDrawData``.

A frame has two steps:

:meth:`Overlay.draw`
    copies the geometry into one of two host-visible vertex/index buffer pairs
    (the last frame's again once it has completed; the other while it may still
    be read, so the CPU fills one while the GPU reads the other) and records
    that pair's command buffer: the copies
    of linked textures, then one render pass that clears the target and issues
    one ``vkCmdDrawIndexed`` per command under its scissor rectangle.
:meth:`Overlay.submit`
    submits it (never waits for it), preceded by one transfer command buffer
    with every upload queued on the textures it draws
    (:func:`~.texture.record_uploads`) and followed, when asked, by a copy to
    a host-cached readback buffer (on a CPU device the host reads the target
    in place instead: :mod:`.overlay_target`) and by ``extra`` command buffers
    (a window's presentation). Submitting again without drawing shows the same frame.

The target (:attr:`Overlay.image`) is an ``R8G8B8A8_UNORM`` colour attachment
created with ``MUTABLE_FORMAT`` and a second, ``R8G8B8A8_UINT`` view: after
the render pass it is in ``GENERAL`` layout and looks like a canvas's storage
image, so :meth:`~.window.Window.bind_canvas` presents an overlay exactly as
it presents a :class:`~.canvas.Canvas` (``image``, ``width``, ``height``),
and a texture can :meth:`~.texture.Texture.link` it.

Coordinates: vertices and clip rectangles are in *display units*; ``display``
``(x, y, width, height)`` (default: the target's pixels) is mapped onto the
whole target, so a HiDPI framebuffer scale is ``target size / display size``.
Scissors follow Dear ImGui's reference backends: clip corners scaled,
clamped to the target, truncated to integers; empty ones are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import vulkan as vk

from ._vk import ffi, new
from .canvas import default_device
from .commands import Recorder
from .device import Device
from .graphics import VERTEX_DTYPE, overlay_pipeline
from .image import write_png
from .memory import Buffer
from .overlay_target import OverlayTarget, record_host_read
from .regions import clear_outside, scissor
from .retained import Retain, RetainedRegions
from .texture import Texture, record_links, record_uploads

__all__ = ["VERTEX_DTYPE", "DrawCommand", "DrawList", "Overlay", "Retain"]

_VERTEX_USAGE = vk.VK_BUFFER_USAGE_VERTEX_BUFFER_BIT
_INDEX_USAGE = vk.VK_BUFFER_USAGE_INDEX_BUFFER_BIT
# On a CPU device (lavapipe) a render pass is one llvmpipe scene, which bins every triangle into
# the tiles it touches before any is rasterised: its memory grows with the pass's triangles (a
# dashboard's first frame, 55,000 of them, took about 14 MB more at its peak in one pass than in
# passes of this many). A GPU keeps one pass: on a tiler every pass loads and stores the target.
CPU_PASS_TRIANGLES = 8192
_INDEX_TYPES = {2: vk.VK_INDEX_TYPE_UINT16, 4: vk.VK_INDEX_TYPE_UINT32}


@dataclass(frozen=True)
class DrawCommand:
    """One indexed draw: ``index_count`` indices from ``index_offset`` of its list.

    ``clip`` is ``(x0, y0, x1, y1)`` in display units; ``vertex_offset`` is
    added to every index (Dear ImGui's ``VtxOffset``).
    """

    texture: Texture
    clip: tuple[float, float, float, float]
    index_offset: int
    index_count: int
    vertex_offset: int = 0


@dataclass(frozen=True)
class DrawList:
    """Geometry for :meth:`Overlay.draw`: any buffer-protocol objects (numpy, bytes, ctypes).

    ``vertices`` holds records in :data:`VERTEX_DTYPE` layout (20 bytes each:
    float32 x, y, u, v, then R, G, B, A bytes, straight alpha); ``indices``
    holds uint16 or uint32 values (the frame's ``index_size``). Both are copied
    by :meth:`Overlay.draw`, so they may be reused afterwards.
    """

    vertices: object
    indices: object
    commands: Sequence[DrawCommand]
    retain: Retain | None = None  # a static part whose pixels are kept between frames (retained.py)


class _Slot:
    """One frame's recording and the vertex/index buffers it reads."""

    def __init__(self, device: Device):
        self.recorder = Recorder(device)
        self.vertices: Buffer | None = None
        self.indices: Buffer | None = None
        self.serial: int | None = None
        self.textures: tuple = ()
        self.plan = None  # the retained regions this recording draws or copies
        self.generation = 0  # draws that wrote its buffers (a kept signature names one: retained.py)

    def close(self) -> None:
        self.recorder.close()
        for b in (self.vertices, self.indices):
            if b is not None:
                b.close()
        self.vertices = self.indices = None
        self.textures = ()


class Overlay:
    """An offscreen RGBA8 target of ``width x height`` pixels for 2-D triangle lists. States: live → closed.

    Parameters
    ----------
    width, height : int
        Pixels, 1..16384.
    device : Device, optional
        Borrowed; defaults to :func:`~.canvas.default_device`. A window's
        device when the overlay is shown in that window.
    clear : (r, g, b, a)
        The background, 0..255 per channel; :meth:`draw` can override it per frame.

    Examples
    --------
    >>> with Overlay(64, 32) as ov, Texture(ov.device, 1, 1, pixels=white) as t:   # doctest: +SKIP
    ...     quad = np.zeros(4, VERTEX_DTYPE)
    ...     quad["position"] = [(8, 8), (24, 8), (24, 24), (8, 24)]
    ...     quad["color"] = (255, 0, 0, 255)
    ...     idx = np.array([0, 1, 2, 0, 2, 3], np.uint32)
    ...     ov.draw([DrawList(quad, idx, [DrawCommand(t, (0, 0, 64, 32), 0, 6)])])
    ...     rgba = ov.render()                                    # (32, 64, 4) uint8
    """

    def __init__(self, width: int, height: int, device: Device | None = None, clear=(0, 0, 0, 255)):
        self.device = device or default_device()
        self.pipeline = overlay_pipeline(self.device)
        self.clear = _color(clear)
        self.width = self.height = 0
        self.image: OverlayTarget | None = None
        self._slots = [_Slot(self.device), _Slot(self.device)]
        self._current: _Slot | None = None
        self._serial: int | None = None
        self.read_back_serial: int | None = None
        self._readback: Buffer | None = None
        self._readback_recorder = Recorder(self.device)
        self._scissor = new("VkRect2D")
        self._passes: dict = {}  # (load, clear) -> the render pass's begin structs for this target
        self.retained = RetainedRegions(self.device)
        self.resize(width, height)

    # -- target ------------------------------------------------------------------------------
    def resize(self, width: int, height: int) -> None:
        """Make a new target of ``width x height`` (waits for the GPU); draw again afterwards.

        A window showing the overlay must ``bind_canvas`` it again (its target image changed).
        """
        width, height = int(width), int(height)
        if not (1 <= width <= 16384 and 1 <= height <= 16384):
            raise ValueError(f"overlay size must be 1..16384 px per side, got {width}x{height}")
        if self.image is not None:
            self.device.wait()
            self.image.close()
            if self._readback is not None:
                self._readback.close()
        self.width, self.height = width, height
        self._passes.clear()
        self.retained.close()  # a new target holds none of the kept regions
        self.image = OverlayTarget(self.device, self.pipeline.render_pass, width, height)
        rec = self._readback_recorder.begin()
        if self.image.host is None:
            self._readback = Buffer(self.device, width * height * 4, readback=True)
            rec.copy_image_to_buffer(self.image, self._readback)  # the render pass made the writes visible
            rec.host_barrier()
        else:  # a CPU device: the host reads the target itself (overlay_target.py)
            self._readback = None
            record_host_read(rec.handle)
        rec.end()
        self._current = None
        self.read_back_serial = None

    # -- frames ------------------------------------------------------------------------------
    def draw(self, lists: Sequence[DrawList], display=None, clear=None, index_size: int = 4) -> None:
        """Copy ``lists`` and record the next frame (shown by the next :meth:`submit`).

        Parameters
        ----------
        lists : sequence of DrawList
            Drawn in order, each command in order (later ones on top).
        display : (x, y, width, height), optional
            The rectangle of display units mapped onto the whole target;
            default ``(0, 0, width, height)``.
        clear : (r, g, b, a), optional
            This frame's background (default: the overlay's ``clear``).
        index_size : {2, 4}
            Bytes per index in every list.
        """
        self._check_live()
        if index_size not in _INDEX_TYPES:
            raise ValueError(f"index_size must be 2 or 4 (bytes per index), got {index_size}")
        ox, oy, dw, dh = (0.0, 0.0, float(self.width), float(self.height)) if display is None \
            else (float(v) for v in display)
        if not (dw > 0 and dh > 0):
            raise ValueError(f"the display rectangle must have a positive size, got {display}")
        geometry = [(_bytes(d.vertices, "vertices", VERTEX_DTYPE.itemsize),
                     _bytes(d.indices, "indices", index_size)) for d in lists]
        # the last frame's slot again when that frame is done (a PNG, a web frame, a test: the
        # caller waited), so the other pair is only made when frames overlap (a window's)
        slot = self._current
        if slot is None or (slot.serial is not None and not self.device.is_done(slot.serial)):
            slot = self._slots[slot is self._slots[0]]
            if slot.serial is not None:
                self.device.wait(slot.serial)  # its buffers and command buffer may still be in use
        textures: dict[int, Texture] = {}
        for n, d in enumerate(lists):
            for c in d.commands:
                if not isinstance(c.texture, Texture) or c.texture.handle is None:
                    raise ValueError(f"draw list {n} uses {c.texture!r}: not a live Texture "
                                     "(closed, or never made)")
                if c.texture.device is not self.device:
                    raise ValueError(f"texture {c.texture.id} belongs to another device")
                textures[c.texture.id] = c.texture
        offsets = np.zeros((len(geometry) + 1, 2), np.int64)  # where each list's bytes go
        offsets[1:] = np.cumsum([(v.size, i.size) for v, i in geometry], axis=0).reshape(-1, 2)
        v_total, i_total = (int(t) for t in offsets[-1])
        clear = self.clear if clear is None else _color(clear)
        transform = (ox, oy, self.width / dw, self.height / dh)
        # the kept regions compare static parts with the bytes the frames before wrote: planned
        # before this frame writes its own (retained.py)
        plan = self.retained.plan(lists, geometry, transform, (self.width, self.height), clear, index_size,
                                  slot, offsets.tolist())
        slot.generation += 1
        slot.vertices = _ensure(self.device, slot.vertices, v_total, _VERTEX_USAGE)
        slot.indices = _ensure(self.device, slot.indices, i_total, _INDEX_USAGE)
        for (v, i), (v_at, i_at) in zip(geometry, offsets.tolist(), strict=False):
            slot.vertices.write(v, v_at)
            slot.indices.write(i, i_at)
        rec = slot.recorder.begin()
        record_links(rec, textures.values())
        first = len(lists) if plan is None else next(n for n, p in enumerate(plan) if p is not None)
        # pass 1: the lists before the first retained one, and the static parts not kept. The
        # kept regions stay in the target: only the rest of it is cleared
        kept = [p[1].rect for p in plan or () if p is not None and p[3]]
        self._begin_pass(rec, clear, load=bool(kept))
        if kept:
            clear_outside(rec.handle, clear, kept, self.width, self.height)
        restart = None  # a CPU device's pass split every CPU_PASS_TRIANGLES (see there)
        if self.device.info.kind == "cpu":
            def restart():
                vk.lib.vkCmdEndRenderPass(rec.handle)
                self._begin_pass(rec, clear, load=True)
                self._bind(rec, slot, dw, dh, ox, oy, index_size)
        if v_total and i_total:
            self._bind(rec, slot, dw, dh, ox, oy, index_size)
            self._record_commands(rec, lists, geometry, transform, index_size, lambda n, d: (
                d.commands if n < first else () if plan[n] is None or plan[n][3] else d.commands[:plan[n][0]]),
                restart)
        vk.vkCmdEndRenderPass(rec.handle)
        if plan is not None:  # the kept regions' saves (retained.py), then pass 2: the rest, in order
            self.retained.record_copies(rec.handle, self.image, plan)
            self._begin_pass(rec, clear, load=True)
            if v_total and i_total:
                self._bind(rec, slot, dw, dh, ox, oy, index_size)
                self._record_commands(rec, lists, geometry, transform, index_size, lambda n, d: (
                    () if n < first else d.commands if plan[n] is None else d.commands[plan[n][0]:]), restart)
            vk.vkCmdEndRenderPass(rec.handle)
        rec.end()
        slot.plan = plan
        self.image.layout = vk.VK_IMAGE_LAYOUT_GENERAL
        slot.textures = tuple(textures.values())
        slot.serial = None
        self._current = slot

    def _bind(self, rec: Recorder, slot, dw, dh, ox, oy, index_size: int) -> None:
        vk.vkCmdBindVertexBuffers(rec.handle, 0, 1, [slot.vertices.handle], [0])
        vk.vkCmdBindIndexBuffer(rec.handle, slot.indices.handle, 0, _INDEX_TYPES[index_size])
        sx, sy = 2.0 / dw, 2.0 / dh
        push = ffi.new("float[4]", [sx, sy, -1.0 - ox * sx, -1.0 - oy * sy])
        vk.vkCmdPushConstants(rec.handle, self.pipeline.layout, vk.VK_SHADER_STAGE_VERTEX_BIT, 0, 16, push)

    def _begin_pass(self, rec: Recorder, clear, load: bool = False) -> None:
        key = (load, tuple(clear))  # the structs, made once per target (resize clears them) and colour
        made = self._passes.get(key)
        if made is None:
            if len(self._passes) > 8:
                self._passes.clear()
            clear_value = ffi.new("VkClearValue[1]")
            for i, c in enumerate(clear):
                clear_value[0].color.float32[i] = c / 255.0
            area = new("VkRect2D", offset=new("VkOffset2D", x=0, y=0),
                       extent=new("VkExtent2D", width=self.width, height=self.height))
            info = new("VkRenderPassBeginInfo",
                       renderPass=self.pipeline.load_pass if load else self.pipeline.render_pass,
                       framebuffer=self.image.framebuffer, renderArea=area, clearValueCount=1,
                       pClearValues=clear_value)
            viewport = new("VkViewport", x=0.0, y=0.0, width=float(self.width), height=float(self.height),
                           minDepth=0.0, maxDepth=1.0)
            made = self._passes[key] = (info, viewport, clear_value)
        info, viewport, _ = made
        lib = vk.lib  # the loader's entry points (see _record_commands)
        lib.vkCmdBeginRenderPass(rec.handle, info, vk.VK_SUBPASS_CONTENTS_INLINE)
        lib.vkCmdSetViewport(rec.handle, 0, 1, viewport)
        lib.vkCmdBindPipeline(rec.handle, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, self.pipeline.handle)

    def _record_commands(self, rec: Recorder, lists, geometry, transform, index_size: int, pick,
                         restart=None) -> None:
        """The draws ``pick(n, list)`` chooses, in order; ``restart()`` (when given) ends the render
        pass and begins a loading one, bound again, after every CPU_PASS_TRIANGLES triangles."""
        w, h = self.width, self.height
        triangles = 0
        sc, cb, layout = self._scissor, rec.handle, self.pipeline.layout
        lib, sets, bound = vk.lib, ffi.new("VkDescriptorSet[1]"), None  # the loader's entry points:
        # a command costs ~1 us there, ~15 us through the vulkan package's argument conversion
        v_base = i_base = 0
        for n, (d, (v, i)) in enumerate(zip(lists, geometry, strict=True)):
            n_vertices, n_indices = v.size // VERTEX_DTYPE.itemsize, i.size // index_size
            for c in pick(n, d):
                if c.index_count <= 0:
                    continue
                if c.index_offset < 0 or c.index_offset + c.index_count > n_indices:
                    raise ValueError(f"a draw command reads indices {c.index_offset}.."
                                     f"{c.index_offset + c.index_count} of a list holding {n_indices}")
                if not 0 <= c.vertex_offset < max(n_vertices, 1):
                    raise ValueError(f"vertex_offset {c.vertex_offset} is outside a list of {n_vertices} "
                                     "vertices")
                rect = scissor(c.clip, transform, w, h)
                if rect is None:
                    continue
                if bound is not c.texture:
                    sets[0] = c.texture.descriptor_set
                    lib.vkCmdBindDescriptorSets(cb, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, layout, 0, 1, sets, 0,
                                                ffi.NULL)
                    bound = c.texture
                sc.offset.x, sc.offset.y, sc.extent.width, sc.extent.height = rect
                lib.vkCmdSetScissor(cb, 0, 1, sc)
                lib.vkCmdDrawIndexed(cb, c.index_count, 1, i_base + c.index_offset, v_base + c.vertex_offset, 0)
                triangles += c.index_count // 3
                if restart is not None and triangles >= CPU_PASS_TRIANGLES:
                    restart()
                    triangles, bound = 0, None
            v_base += n_vertices
            i_base += n_indices

    def submit(self, wait=(), signal=(), extra=(), extra_wait=(), extra_signal=(),
               readback: bool = True) -> int:
        """Submit the last drawn frame (a cleared one if nothing was drawn); returns its serial.

        Same signature as :meth:`Canvas.submit` so a session can drive either;
        the overlay makes one submission, which waits on ``wait`` and
        ``extra_wait`` and signals ``signal`` and ``extra_signal``. ``extra``
        command buffers (a window's presentation) run after the frame.
        ``readback=False`` skips the copy to host memory. Never waits for the
        GPU unless this same frame is still executing from an earlier submit.
        """
        self._check_live()
        if self._current is None:
            self.draw([])
        slot = self._current
        for t in slot.textures:
            if t.handle is None:
                raise ValueError(f"texture {t.id} was closed after draw(); draw the frame again")
        if slot.serial is not None:
            self.device.wait(slot.serial)  # a command buffer cannot be pending twice
        uploads = staging = None
        again = slot.plan is None and slot.serial is not None  # this recording, submitted before
        if again or any(t.pending for t in slot.textures):
            uploads = Recorder(self.device).begin()
            staging = record_uploads(uploads, slot.textures)
            if again:  # the kept regions' static pixels under its second pass, back (retained.py)
                self.retained.record_undo(uploads.handle, self.image)
            uploads.end()
        buffers = ([uploads.handle] if uploads else []) + [slot.recorder.handle]
        if readback:
            buffers.append(self._readback_recorder.handle)
        serial = self.device.submit([*buffers, *extra], wait=[*wait, *extra_wait],
                                    signal=[*signal, *extra_signal])
        if uploads is not None:
            uploads.close()  # both released once this submission has finished
        if staging is not None:
            staging.close()
        slot.serial = self._serial = serial
        self.retained.commit(slot.plan, again)  # what this frame drew is kept for the next ones
        slot.plan = None  # (submitting it again leaves the target as the first time: see above)
        self.read_back_serial = serial if readback else None
        return serial

    def render(self, copy: bool = True) -> np.ndarray:
        """Submit the last drawn frame, wait for it and return ``(height, width, 4)`` uint8 RGBA
        (``copy=False``: see :meth:`pixels`)."""
        self.device.wait(self.submit())
        return self.pixels(copy)

    def read_back(self) -> np.ndarray:
        """Copy the target to host memory now (waits) and return it (after a ``readback=False`` frame)."""
        self._check_live()
        if self._serial is None:
            return self.render()
        self.device.wait()
        self._serial = self.device.submit([self._readback_recorder.handle])
        self.read_back_serial = self._serial
        self.device.wait(self._serial)
        return self.pixels()

    def done(self) -> bool:
        """True when the last submitted frame has completed (never blocks)."""
        return self._serial is None or self.device.is_done(self._serial)

    def pixels(self, copy: bool = True) -> np.ndarray:
        """A copy of the last frame read back (undefined before the first :meth:`render`).
        ``copy=False``: a read-only view of the readback buffer (on a CPU device, of the target
        itself) instead (13 MB less to copy at 2400x1400), valid until the next frame is
        submitted or the overlay resized or closed: for a caller that consumes it at once
        (writes a PNG)."""
        self._check_live()
        if self._readback is None:
            return self.image.host.copy() if copy else self.image.host
        view = self._readback.view(np.uint8, self.width * self.height * 4).reshape(self.height, self.width, 4)
        if copy:
            return view.copy()
        view.flags.writeable = False
        return view

    def save_png(self, path, rgba: np.ndarray | None = None) -> Path:
        """Render (unless ``rgba`` is given) and write a PNG; returns the path."""
        return write_png(path, self.render() if rgba is None else rgba)

    # -- lifetime ----------------------------------------------------------------------------
    def _check_live(self) -> None:
        if self.image is None:
            raise ValueError("this overlay is closed")

    def close(self) -> None:
        """Release the target and buffers (after the GPU is done with them); textures are the caller's."""
        if self.image is None:
            return
        for slot in self._slots:
            slot.close()
        self.retained.close()
        self._readback_recorder.close()
        if self._readback is not None:
            self._readback.close()
        self.image.close()
        self.image = None
        self._current = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _color(rgba) -> tuple[int, int, int, int]:
    c = tuple(int(v) for v in rgba)
    if len(c) != 4 or not all(0 <= v <= 255 for v in c):
        raise ValueError(f"a colour is four integers 0..255 (r, g, b, a), got {rgba!r}")
    return c


def _bytes(data, what: str, unit: int) -> np.ndarray:
    """A flat uint8 view (no copy) of a buffer-protocol object, checked against its element size."""
    if isinstance(data, np.ndarray) and data.dtype.itemsize != unit and data.dtype != np.uint8:
        raise ValueError(f"{what} have {data.dtype.itemsize}-byte elements ({data.dtype}); "
                         f"this frame takes {unit}-byte ones")
    try:
        raw = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else \
            np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be a contiguous buffer (numpy array, bytes, ctypes array): {exc}") \
            from exc
    if raw.size % unit:
        raise ValueError(f"{what} hold {raw.size} bytes, not a whole number of {unit}-byte elements")
    return raw


def _ensure(device: Device, buffer: Buffer | None, nbytes: int, usage: int) -> Buffer:
    """``buffer`` if it holds ``nbytes``, else a new host-visible one (powers of two, at least 64 KiB)."""
    if buffer is not None and buffer.size >= nbytes:
        return buffer
    if buffer is not None:
        buffer.close()
    size = max(1 << 16, 1 << (max(nbytes, 1) - 1).bit_length())
    return Buffer(device, size, host_visible=True, usage=usage)
