"""Dear ImGui + ImPlot (imgui-bundle) rendered by the engine's overlay pipeline.

:class:`ImGuiRenderer` owns one ImGui context and one ImPlot context, an
engine :class:`~caliper_vk.engine.overlay.Overlay` to draw them into, and the
textures they use. It works offscreen (``render()`` returns RGBA pixels; no
display needed) or in a :class:`~caliper_vk.engine.window.Window`
(``present()``), with the same frame code::

    ui = ImGuiRenderer(size=(960, 600))               # or ImGuiRenderer(window=Window((960, 600)))
    loss_tex = ui.add_texture(rgba)                   # (h, w, 4) uint8; or ui.add_canvas_texture(canvas)
    for step in range(3):                             # the first frame lays windows out, draws little
        ui.new_frame()                                # input, display size, delta time
        imgui.begin("Loss")
        if implot.begin_plot("loss"):
            implot.plot_line("train", steps, loss)
            implot.plot_image("weights", loss_tex, (0, 0), (1, 1))
            implot.end_plot()
        imgui.image(loss_tex, loss_tex.size)
        imgui.end()
        rgba = ui.render()                            # (600, 960, 4) uint8; ui.present() in a window
    ui.close()

What the backend does for Dear ImGui ≥ 1.92 (imgui-bundle 1.93):

- sets ``BackendFlags_.renderer_has_textures`` and services
  ``draw_data.textures`` every frame: *create* makes an engine
  :class:`~caliper_vk.engine.texture.Texture` (RGBA32 or Alpha8) from
  ``get_pixels_array()``, *update* queues each rectangle of ``tex.updates``,
  *destroy* closes it once the texture has gone unused; the font atlas grows
  and changes this way (new glyphs are rasterized on demand);
- sets ``renderer_has_vtx_offset`` and hands each ``ImDrawList``'s vertex and
  index memory (``data_address()`` / ``size()``, read in place through
  ctypes, copied once into the engine's buffers) with its commands
  (``clip_rect``, ``idx_offset``, ``vtx_offset``, texture id) to
  :meth:`Overlay.draw`, which scales clip rectangles from display units to
  framebuffer pixels;
- feeds input from :class:`~caliper_vk.engine.window.Event` records: the
  window's own (``new_frame`` polls it) or any list given to :meth:`feed`, so
  headless tests move the mouse, click and type.

Textures the caller shows (:meth:`add_texture`, :meth:`add_canvas_texture`)
are :class:`UITexture` objects: ``imgui.ImTextureRef`` subclasses, usable
wherever imgui or implot take a texture, with ``size`` for ``imgui.image``.
A canvas texture copies the canvas's image on the GPU every frame (no host
round trip); submit the canvas's frame before :meth:`render` / :meth:`present`.

Not under the byte-exact contract: sampling, blending and anti-aliasing are
the driver's. Plain rectangles and 1:1 ``nearest`` images are exact on
lavapipe (the tests rely on it).
"""

from __future__ import annotations

import ctypes
import importlib.util
import time
from pathlib import Path

import numpy as np
from imgui_bundle import imgui, implot

from caliper_vk.engine.overlay import DrawCommand, DrawList, Overlay, Retain
from caliper_vk.engine.texture import Texture
from caliper_vk.engine.window import Event

from .ui_texture import UITexture, as_rgba, image_of, pixels_of

__all__ = ["DEFAULT_FONT_PX", "ImGuiRenderer", "UITexture", "find_font"]

DEFAULT_FONT_PX = 16.0
BACKGROUND = (24, 24, 28, 255)
# DejaVu Sans reads well at 15-16 px: the system's (fonts-dejavu-core), else matplotlib's copy.
_SYSTEM_FONTS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/TTF/DejaVuSans.ttf",
                 "/usr/share/fonts/dejavu/DejaVuSans.ttf")
_MOD_KEYS = ((1, "mod_shift"), (2, "mod_ctrl"), (4, "mod_alt"), (8, "mod_super"))


def find_font() -> Path | None:
    """A DejaVu Sans TTF: the system's, else matplotlib's bundled copy; None if neither exists."""
    for path in _SYSTEM_FONTS:
        if Path(path).is_file():
            return Path(path)
    spec = importlib.util.find_spec("matplotlib")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.is_file():
            return path
    return None


class ImGuiRenderer:
    """Dear ImGui + ImPlot contexts drawn by an engine :class:`Overlay`. States: live → closed.

    Parameters
    ----------
    size : (width, height), optional
        Offscreen display size in pixels. Required without ``window``.
    window : Window, optional
        Borrowed; draw into it with :meth:`present`. Its framebuffer size sets
        the target and its window size the display (HiDPI scale = their ratio).
    device : Device, optional
        Offscreen only: defaults to the process-wide device.
    font : path, "default" or None
        A TTF file; ``None`` picks DejaVu Sans (:func:`find_font`) and falls
        back to Dear ImGui's built-in font; ``"default"`` forces the built-in one.
    font_px : float
        Font size in display units.
    background : (r, g, b, a)
        The clear colour behind the UI, 0..255.
    """

    def __init__(self, size=None, window=None, device=None, font=None, font_px: float = DEFAULT_FONT_PX,
                 background=BACKGROUND):
        if window is None and size is None:
            raise ValueError("give size=(width, height) for offscreen rendering, or window=Window(...)")
        if window is not None and device is not None and device is not window.device:
            raise ValueError("a windowed renderer draws with the window's device; leave device= unset")
        self.window = window
        self._ctx = imgui.create_context()
        # CreateContext makes the new context current only when there was none: with another
        # renderer alive, the settings below would land on *its* context (and this one would
        # keep writing imgui.ini and lack the texture backend). Make ours current first.
        imgui.set_current_context(self._ctx)
        self._plot_ctx = implot.create_context()
        implot.set_current_context(self._plot_ctx)
        self._textures: dict[int, Texture] = {}  # imgui-made and user textures, by id
        self._user: set[UITexture] = set()
        self._last_time: float | None = None
        self._key_map: dict[int, object] | None = None
        # Texture requests serviced so far (Dear ImGui's font atlas grows by "update" requests).
        self.texture_requests = {"create": 0, "update": 0, "destroy": 0}
        self._retain: dict = {}  # this frame's static parts: draw list owner -> (key, vertices, indices)
        io = imgui.get_io()
        io.set_ini_filename(None)  # never write imgui.ini into the working directory
        io.backend_flags |= (imgui.BackendFlags_.renderer_has_textures
                             | imgui.BackendFlags_.renderer_has_vtx_offset)
        platform = imgui.get_platform_io()
        platform.renderer_texture_max_width = platform.renderer_texture_max_height = 16384
        self.overlay = None
        try:
            self.font = self._load_font(font, font_px)
            if window is not None:
                self.size = self.window.window_size()
                self.overlay = Overlay(*window.framebuffer_size(), device=window.device, clear=background)
                window.bind_canvas(self.overlay)
            else:
                self.size = (int(size[0]), int(size[1]))
                self.overlay = Overlay(*self.size, device=device, clear=background)
        except Exception:
            if self.overlay is not None:
                self.overlay.close()
            implot.destroy_context(self._plot_ctx)
            imgui.destroy_context(self._ctx)
            raise
        self.device = self.overlay.device

    def _load_font(self, font, font_px: float) -> Path | None:
        io = imgui.get_io()
        imgui.get_style().font_size_base = float(font_px)
        if font == "default":
            return None
        path = find_font() if font is None else Path(font)
        if path is None:
            return None
        if not path.is_file():
            raise FileNotFoundError(f"font file {path} does not exist; pass a .ttf path or font=None")
        io.fonts.add_font_from_file_ttf(str(path), float(font_px))
        return path

    # -- frames ----------------------------------------------------------------------------------
    def _activate(self) -> None:
        if self.overlay is None:
            raise ValueError("this ImGuiRenderer is closed")
        imgui.set_current_context(self._ctx)
        implot.set_current_context(self._plot_ctx)

    def new_frame(self, events=None, dt: float | None = None) -> list[Event]:
        """Start a frame: feed input, set display size and delta time, ``imgui.new_frame()``.

        Parameters
        ----------
        events : list of Event, optional
            Input for this frame. With a window and no ``events``, the window
            is polled; the events are returned so the caller can act on them too.
        dt : float, optional
            Seconds since the previous frame (default: measured). Tests pass a
            constant so that frames are reproducible.
        """
        self._activate()
        if self.window is not None:
            if events is None:
                events = self.window.poll()
            if self.window.resized or (self.overlay.width, self.overlay.height) != \
                    self.window.framebuffer_size():
                self.device.wait()
                self.window.recreate(wait=True)  # the dashboard's own loop: sleep while minimised
                self.overlay.resize(*self.window.framebuffer_size())
                self.window.bind_canvas(self.overlay)
            self.size = self.window.window_size()
        events = list(events or ())
        io = imgui.get_io()
        io.display_size = self.size
        io.display_framebuffer_scale = (self.overlay.width / self.size[0], self.overlay.height / self.size[1])
        now = time.perf_counter()
        if dt is None:
            dt = 1.0 / 60.0 if self._last_time is None else now - self._last_time
        self._last_time = now
        io.delta_time = max(float(dt), 1e-6)  # imgui requires a positive step
        self.feed(events)
        for tex in list(self._user):
            tex._refresh(resize=True)
        self._retain = {}
        imgui.new_frame()
        return events

    def feed(self, events) -> None:
        """Pass input events (window coordinates) to Dear ImGui; may be called before ``new_frame``.

        Kinds used: ``move``, ``button``, ``scroll``, ``key``/``key_up``, ``char``
        (see :class:`~caliper_vk.engine.window.Event`); others are ignored.
        """
        self._activate()
        io = imgui.get_io()
        for ev in events:
            if ev.kind == "move":
                io.add_mouse_pos_event(ev.x, ev.y)
            elif ev.kind == "button" and 0 <= ev.button < 5:
                io.add_mouse_pos_event(ev.x, ev.y)
                io.add_mouse_button_event(ev.button, bool(ev.down))
            elif ev.kind == "scroll":
                io.add_mouse_wheel_event(ev.dx, ev.dy)
            elif ev.kind in ("key", "key_up"):
                for bit, name in _MOD_KEYS:
                    io.add_key_event(getattr(imgui.Key, name), bool(ev.mods & bit))
                key = self._imgui_key(ev.code)
                if key is not None:
                    io.add_key_event(key, ev.kind == "key")
            elif ev.kind == "char" and ev.text:
                io.add_input_character(ord(ev.text[0]))

    def _imgui_key(self, code: int):
        if self._key_map is None:
            self._key_map = _glfw_key_map()
        return self._key_map.get(code)

    def _end_frame(self) -> None:
        """``imgui.render()``, service texture requests, hand the draw lists to the overlay."""
        self._activate()
        imgui.render()
        data = imgui.get_draw_data()
        self._service_textures(data)
        for tex in list(self._user):
            tex._refresh(resize=False)
        lists = []
        for dl in data.cmd_lists:
            vtx, idx = dl.vtx_buffer, dl.idx_buffer
            if vtx.size() == 0 or idx.size() == 0:
                continue
            vertices = (ctypes.c_char * (vtx.size() * imgui.VERTEX_SIZE)).from_address(vtx.data_address())
            indices = (ctypes.c_char * (idx.size() * imgui.INDEX_SIZE)).from_address(idx.data_address())
            commands = []
            mark = self._retain.get(dl._owner_name)
            for c in dl.cmd_buffer:
                if c.elem_count == 0:
                    continue
                tid = c.tex_ref.get_tex_id()
                texture = self._textures.get(tid)
                if texture is None:
                    raise ValueError(f"a draw command uses texture id {tid}, which this renderer does not "
                                     "know (closed, or made by another ImGuiRenderer)")
                r = c.clip_rect
                commands.append(DrawCommand(texture, (r.x, r.y, r.z, r.w), c.idx_offset, c.elem_count,
                                            c.vtx_offset))
            lists.append(DrawList(vertices, indices, commands, _retained(mark, commands)))
        pos, size = data.display_pos, data.display_size
        self.overlay.draw(lists, display=(pos.x, pos.y, size.x, size.y), index_size=imgui.INDEX_SIZE)

    def retain(self, key, tag=None, reuse: bool = False) -> None:
        """Mark what the current window has drawn so far as its *static part*, named ``key``
        from frame to frame: the overlay keeps its pixels while it stays byte-for-byte the same
        and draws only what the window draws after this call (engine/retained.py). Its pixels
        are the window's rectangle (and a pixel around it, for its border's anti-aliasing): no
        window drawn before it may overlap that (child windows side by side, apart).

        ``tag``: the inputs the static part was built from; ``reuse=True``: the window skipped
        building it and the pixels kept under ``tag`` stand for it (check :meth:`holds` first)."""
        dl = imgui.get_window_draw_list()
        p, s = imgui.get_window_pos(), imgui.get_window_size()
        bounds = (p.x - 1, p.y - 1, p.x + s.x + 1, p.y + s.y + 1)
        self._retain[dl._owner_name] = (key, dl.vtx_buffer.size(), dl.idx_buffer.size(), bounds, tag, reuse)
        dl.add_draw_cmd()  # what follows starts a command of its own (Dear ImGui would continue
        # the last one while the clip rectangle and texture stay the same)

    def holds(self, key, tag) -> bool:
        """Whether the overlay keeps pixels of ``key`` drawn (twice, alike) from ``tag``: a
        window may then skip building its static part and :meth:`retain` with ``reuse=True``."""
        return self.overlay.retained.holds(key, tag)

    def discard_frame(self) -> None:
        """Finish the frame without drawing it (a layout pass); texture requests are serviced."""
        self._activate()
        imgui.render()
        self._service_textures(imgui.get_draw_data())

    def render(self, copy: bool = True) -> np.ndarray:
        """Finish the frame and draw it offscreen; returns ``(height, width, 4)`` uint8 RGBA
        (``copy=False``: a view valid until the next frame, see ``Overlay.pixels``)."""
        self._end_frame()
        return self.overlay.render(copy)

    def present(self) -> bool:
        """Finish the frame and show it in the window; False when no swapchain image was free."""
        if self.window is None:
            raise ValueError("present() needs a window; this renderer is offscreen (use render())")
        self._end_frame()
        if not self.window.alive or not self.window.acquire():
            return False
        acquired, done = self.window.frame_semaphores
        self.overlay.submit(extra=[self.window.present_commands()], extra_wait=[(acquired, 0)],
                            extra_signal=[(done, 0)], readback=False)
        self.window.present()
        return True

    def save_png(self, path) -> Path:
        """Write the last frame drawn (read back from the GPU) as a PNG; returns the path."""
        return self.overlay.save_png(path, self.overlay.read_back())

    @property
    def wants_mouse(self) -> bool:
        """True when the mouse is over imgui (views under it should ignore it this frame)."""
        self._activate()
        return bool(imgui.get_io().want_capture_mouse)

    # -- textures --------------------------------------------------------------------------------
    def _service_textures(self, data) -> None:
        status = imgui.ImTextureStatus
        for tex in data.textures:
            if tex.status == status.want_create:
                fmt = "alpha8" if tex.format == imgui.ImTextureFormat.alpha8 else "rgba8"
                texture = Texture(self.device, tex.width, tex.height, format=fmt, filter="linear",
                                  pixels=pixels_of(tex))
                self._textures[texture.id] = texture
                tex.set_tex_id(texture.id)
                tex.set_status(status.ok)
                self.texture_requests["create"] += 1
            elif tex.status == status.want_updates:
                texture = self._textures[tex.tex_id]
                pixels = pixels_of(tex)
                for r in tex.updates:
                    texture.update(pixels[r.y:r.y + r.h, r.x:r.x + r.w], r.x, r.y)
                tex.set_status(status.ok)
                self.texture_requests["update"] += 1
            elif tex.status == status.want_destroy and tex.unused_frames > 0:
                texture = self._textures.pop(tex.tex_id, None)
                if texture is not None:
                    texture.close()  # released after the frames that may sample it
                tex.set_tex_id(0)
                tex.set_status(status.destroyed)
                self.texture_requests["destroy"] += 1

    def add_texture(self, pixels: np.ndarray, filter: str = "nearest") -> UITexture:
        """A texture from ``(h, w, 4)`` or ``(h, w, 3)`` uint8 pixels; ``update()`` it later.

        ``filter="nearest"`` shows it at 1:1 (or integer zoom) with its exact
        bytes; ``"linear"`` smooths a scaled image.
        """
        rgba = as_rgba(pixels)
        self._activate()
        texture = Texture(self.device, rgba.shape[1], rgba.shape[0], filter=filter, pixels=rgba)
        return self._register(UITexture(self, texture))

    def add_canvas_texture(self, canvas, filter: str = "nearest") -> UITexture:
        """A texture showing a live engine canvas (or any RGBA8 engine image), copied on the GPU.

        ``canvas`` is a :class:`~caliper_vk.engine.Canvas`, an engine image, or
        a function returning either, called before every frame -- e.g.
        ``lambda: session.canvas``, which follows a session that replaces its
        canvas on re-layout (a new size makes a new texture; the
        :class:`UITexture` keeps working). The canvas must be on this
        renderer's device and submitted before each frame that shows it.
        """
        self._activate()
        image = image_of(canvas)
        if getattr(image, "handle", None) is None:
            raise ValueError("the canvas is closed (or is not an engine Canvas / image)")
        if image.device is not self.device:
            raise ValueError("the canvas was made on another device; make it with device=ui.device")
        texture = Texture(self.device, image.width, image.height, filter=filter)
        texture.link(image)
        return self._register(UITexture(self, texture, source=canvas))

    def _register(self, tex: UITexture) -> UITexture:
        self._textures[tex.id] = tex.texture
        self._user.add(tex)
        return tex

    # -- lifetime --------------------------------------------------------------------------------
    def close(self) -> None:
        """Release textures, the overlay and both contexts (the window is the caller's)."""
        if self.overlay is None:
            return
        imgui.set_current_context(self._ctx)
        implot.set_current_context(self._plot_ctx)
        for tex in imgui.get_platform_io().textures:
            if tex.status != imgui.ImTextureStatus.destroyed:
                tex.set_tex_id(0)
                tex.set_status(imgui.ImTextureStatus.destroyed)
        for texture in self._textures.values():
            texture.close()
        self._textures.clear()
        self._user.clear()
        self.overlay.close()
        self.overlay = None
        implot.destroy_context(self._plot_ctx)
        imgui.destroy_context(self._ctx)
        self._ctx = self._plot_ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _retained(mark, commands) -> Retain | None:
    """The overlay's :class:`Retain` for a draw list marked by :meth:`ImGuiRenderer.retain`:
    its commands before the mark's index count; None when a command straddles the mark."""
    if mark is None:
        return None
    key, vertices, indices, bounds, tag, reuse = mark
    split = sum(1 for c in commands if c.index_offset + c.index_count <= indices)
    if any(c.index_offset < indices for c in commands[split:]):
        if reuse:
            raise ValueError(f"the window marked {key!r} reused has a draw command across its mark")
        return None
    return Retain(key, split, vertices, bounds, tag, reuse)


def _glfw_key_map() -> dict[int, object]:
    """GLFW key codes → ``imgui.Key`` (the keys Dear ImGui's navigation and text fields use)."""
    import glfw

    k = imgui.Key
    table = {
        glfw.KEY_TAB: k.tab, glfw.KEY_LEFT: k.left_arrow, glfw.KEY_RIGHT: k.right_arrow,
        glfw.KEY_UP: k.up_arrow, glfw.KEY_DOWN: k.down_arrow, glfw.KEY_PAGE_UP: k.page_up,
        glfw.KEY_PAGE_DOWN: k.page_down, glfw.KEY_HOME: k.home, glfw.KEY_END: k.end,
        glfw.KEY_INSERT: k.insert, glfw.KEY_DELETE: k.delete, glfw.KEY_BACKSPACE: k.backspace,
        glfw.KEY_SPACE: k.space, glfw.KEY_ENTER: k.enter, glfw.KEY_ESCAPE: k.escape,
        glfw.KEY_KP_ENTER: k.keypad_enter, glfw.KEY_LEFT_SHIFT: k.left_shift,
        glfw.KEY_RIGHT_SHIFT: k.right_shift, glfw.KEY_LEFT_CONTROL: k.left_ctrl,
        glfw.KEY_RIGHT_CONTROL: k.right_ctrl, glfw.KEY_LEFT_ALT: k.left_alt,
        glfw.KEY_RIGHT_ALT: k.right_alt, glfw.KEY_LEFT_SUPER: k.left_super,
        glfw.KEY_RIGHT_SUPER: k.right_super, glfw.KEY_MINUS: k.minus, glfw.KEY_EQUAL: k.equal,
        glfw.KEY_PERIOD: k.period, glfw.KEY_COMMA: k.comma, glfw.KEY_SLASH: k.slash,
    }
    for i in range(26):
        table[glfw.KEY_A + i] = getattr(k, chr(ord("a") + i))
    for i in range(10):
        table[glfw.KEY_0 + i] = getattr(k, f"_{i}")
    for i in range(12):
        table[glfw.KEY_F1 + i] = getattr(k, f"f{i + 1}")
    return table
