"""Dear ImGui + ImPlot through the engine's overlay pipeline: exact where the pipeline is exact
(plain rectangles, 1:1 nearest images, canvases shown as textures), reproducible everywhere,
driven by programmatic input, and shown in a window under Xvfb equal to the offscreen frame."""

import shutil
import time

import numpy as np
import pytest
from imgui_bundle import imgui, implot
from PIL import Image

from caliper_vk import Canvas, Heatmap
from caliper_vk.dashboard.imgui_backend import BACKGROUND, ImGuiRenderer
from caliper_vk.engine.overlay import VERTEX_DTYPE, DrawCommand, DrawList, Overlay
from caliper_vk.engine.texture import Texture
from caliper_vk.engine.window import Event
from images import assert_same_image
from xvfb import xvfb

DT = 1.0 / 60.0


def frames(ui, build, n=1):
    """``n`` frames of ``build()`` with a fixed time step; returns the last one's pixels."""
    for _ in range(n):
        ui.new_frame(dt=DT)
        build()
        rgba = ui.render()
    return rgba


def background(w, h):
    out = np.empty((h, w, 4), np.uint8)
    out[:] = BACKGROUND
    return out


def dashboard(tex, steps, loss):
    def build():
        imgui.set_next_window_pos((8, 8))
        imgui.set_next_window_size((520, 340))
        imgui.begin("Training")
        imgui.text(f"step {len(steps)} · loss {loss[-1]:.4f}")
        if implot.begin_plot("loss", (-1, -1)):
            implot.setup_axes("step", "loss")
            implot.plot_line("train", steps, loss)
            implot.plot_image("weights", tex, implot.Point(250, 1.2), implot.Point(380, 2.2))
            implot.end_plot()
        imgui.end()
    return build


def test_dashboard_frame_is_reproducible_and_drawn(artifacts):
    steps = np.arange(400, dtype=np.float64)
    loss = 2.3 * np.exp(-steps / 100) + 0.1 + 0.04 * np.sin(steps * 0.7)
    weights = np.random.default_rng(1).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    shots = []
    for _ in range(2):
        with ImGuiRenderer(size=(540, 360)) as ui:
            tex = ui.add_texture(weights)
            shots.append(frames(ui, dashboard(tex, steps, loss), n=3))
            assert ui.texture_requests["create"] >= 1  # the font atlas
    artifacts.mkdir(parents=True, exist_ok=True)
    Image.fromarray(shots[0], "RGBA").save(artifacts / "dashboard.png")  # an example frame to look at
    assert_same_image(shots[1], shots[0], artifacts)
    a = shots[0]
    assert len(np.unique(a.reshape(-1, 4), axis=0)) > 50  # text, lines, image: not blank
    line_blue = (np.abs(a[..., :3].astype(int) - (76, 114, 176)).sum(axis=2) < 60).sum()
    assert line_blue > 200, "the ImPlot line is missing"
    for color in weights.reshape(-1, 3)[:8]:  # the plotted image's texels are on screen
        assert (a[..., :3] == color).all(axis=2).any()


def test_two_renderers_alive_at_once_each_draw_and_write_no_ini(tmp_path, monkeypatch):
    """Dear ImGui's CreateContext keeps the previous context current when there is one: the
    second renderer's settings once landed on the first's context (its frames then failed
    with 'font atlas is not built', and it wrote imgui.ini into the working directory)."""
    monkeypatch.chdir(tmp_path)
    steps = np.arange(200, dtype=np.float64)
    loss = np.exp(-steps / 50)
    weights = np.zeros((4, 4, 3), np.uint8)
    with ImGuiRenderer(size=(320, 240)) as first, ImGuiRenderer(size=(320, 240)) as second:
        shots = [frames(ui, dashboard(ui.add_texture(weights), steps, loss), n=3)
                 for ui in (first, second, first)]
    assert_same_image(shots[1], shots[0], tmp_path / "diff")
    assert_same_image(shots[2], shots[0], tmp_path / "diff2")
    assert not (tmp_path / "imgui.ini").exists()


def test_filled_rectangles_exact_and_blended():
    def build():
        dl = imgui.get_foreground_draw_list()
        dl.add_rect_filled((10, 20), (50, 35), imgui.IM_COL32(200, 30, 60, 255))
        dl.add_rect_filled((30, 5), (70, 28), imgui.IM_COL32(20, 240, 100, 128))
    with ImGuiRenderer(size=(80, 48)) as ui:
        a = frames(ui, build, n=2)
    want = background(80, 48).astype(np.float64)
    want[20:35, 10:50] = (200, 30, 60, 255)
    exact = want.copy()
    alpha = 128 / 255
    src = np.array([20, 240, 100, 128], np.float64)
    want[5:28, 30:70, :3] = src[:3] * alpha + want[5:28, 30:70, :3] * (1 - alpha)
    want[5:28, 30:70, 3] = src[3] + want[5:28, 30:70, 3] * (1 - alpha)
    assert np.abs(a.astype(np.float64) - np.clip(want, 0, 255)).max() <= 1  # the blend equation
    opaque = np.ones((48, 80), bool)
    opaque[5:28, 30:70] = False
    assert np.array_equal(a[opaque], exact.astype(np.uint8)[opaque])  # exact outside the blend


def test_texture_at_one_to_one_with_nearest_is_its_bytes():
    rgba = np.random.default_rng(2).integers(0, 256, (23, 37, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    with ImGuiRenderer(size=(64, 40)) as ui:
        tex = ui.add_texture(rgba)
        a = frames(ui, lambda: imgui.get_foreground_draw_list().add_image(tex, (7, 5), (44, 28)), n=2)
        want = background(64, 40)
        want[5:28, 7:44] = rgba
        assert np.array_equal(a, want)
        patch = np.zeros((4, 6, 3), np.uint8)  # updates are honoured from the next frame on
        tex.update(patch, x=30, y=2)
        b = frames(ui, lambda: imgui.get_foreground_draw_list().add_image(tex, (7, 5), (44, 28)))
        want[7:11, 37:43, :3] = 0
        assert np.array_equal(b, want)


def test_canvas_shown_as_texture_equals_canvas_pixels():
    values = np.random.default_rng(3).standard_normal((12, 20)).astype(np.float32)
    with Canvas(60, 36) as canvas, ImGuiRenderer(size=(80, 50)) as ui:
        heat = Heatmap(values, colormap="magma")
        canvas.add(heat)
        first = canvas.render()
        tex = ui.add_canvas_texture(canvas)
        a = frames(ui, lambda: imgui.get_foreground_draw_list().add_image(tex, (4, 9), (64, 45)), n=2)
        assert np.array_equal(a[9:45, 4:64], first)
        heat.set_data(values[::-1].copy())  # the next canvas frame reaches the UI on the GPU
        second = canvas.render()
        assert not np.array_equal(second, first)
        b = frames(ui, lambda: imgui.get_foreground_draw_list().add_image(tex, (4, 9), (64, 45)))
        assert np.array_equal(b[9:45, 4:64], second)


def test_canvas_texture_follows_a_replaced_canvas():
    values = np.random.default_rng(4).standard_normal((8, 8)).astype(np.float32)
    current = {}

    def relayout(w, h):  # what a session does on resize: a new canvas
        if current:
            current["canvas"].close()
        current["canvas"] = Canvas(w, h)
        current["canvas"].add(Heatmap(values))
        return current["canvas"].render()

    with ImGuiRenderer(size=(64, 48)) as ui:
        first = relayout(20, 10)
        tex = ui.add_canvas_texture(lambda: current["canvas"])
        a = frames(ui, lambda: imgui.get_foreground_draw_list().add_image(tex, (0, 0), tex.size), n=2)
        assert np.array_equal(a[:10, :20], first)
        second = relayout(30, 16)
        b = frames(ui, lambda: imgui.get_foreground_draw_list().add_image(tex, (0, 0), tex.size))
        assert tex.size == (30, 16) and np.array_equal(b[:16, :30], second)
        current["canvas"].close()


def test_programmatic_mouse_hovers_and_clicks_a_button():
    state = {"clicks": 0, "hovered": False}

    def build():
        imgui.set_next_window_pos((0, 0))
        imgui.set_next_window_size((200, 100))
        imgui.begin("panel")
        if imgui.button("Reset", (80, 30)):
            state["clicks"] += 1
        state["hovered"] = imgui.is_item_hovered()
        state["rect"] = (imgui.get_item_rect_min(), imgui.get_item_rect_max())
        imgui.end()
    with ImGuiRenderer(size=(200, 100)) as ui:
        idle = frames(ui, build, n=3)
        lo, hi = state["rect"]
        x, y = (lo.x + hi.x) / 2, (lo.y + hi.y) / 2
        ui.feed([Event("move", x=x, y=y)])
        hovered = frames(ui, build)
        assert state["hovered"] and not state["clicks"]
        assert not np.array_equal(hovered, idle)  # the hover colour is drawn
        ui.feed([Event("button", x=x, y=y, button=0, down=True)])
        frames(ui, build)
        ui.feed([Event("button", x=x, y=y, button=0, down=False)])
        frames(ui, build)
        assert state["clicks"] == 1
        ui.feed([Event("move", x=190, y=95)])
        frames(ui, build)
        assert not state["hovered"]


def test_font_atlas_updates_are_honoured():
    def build():
        imgui.push_font(None, 44.0)  # a new size: glyphs are rasterized and uploaded as updates
        imgui.get_foreground_draw_list().add_text((4, 4), imgui.IM_COL32(255, 255, 255, 255), "Wq")
        imgui.pop_font()
    with ImGuiRenderer(size=(96, 60)) as ui:
        frames(ui, lambda: None, n=2)
        before = dict(ui.texture_requests)
        a = frames(ui, build, n=2)
        assert ui.texture_requests["update"] + ui.texture_requests["create"] > \
            before["update"] + before["create"]
    assert (a[..., :3] >= 250).all(axis=2).sum() > 80  # the new glyphs are inked


def test_overlay_clips_scales_and_samples_alpha_textures(device):
    quad = np.zeros(4, VERTEX_DTYPE)
    quad["position"] = [(0, 0), (32, 0), (32, 16), (0, 16)]
    quad["color"] = (255, 128, 0, 255)
    quad["uv"] = 0.5
    idx = np.array([0, 1, 2, 0, 2, 3], np.uint16)
    with Overlay(64, 32, device=device, clear=(0, 0, 0, 255)) as ov, \
            Texture(device, 1, 1, format="alpha8", pixels=np.full((1, 1), 255, np.uint8)) as t:
        clip = (4, 2, 20, 12)  # display units; display (0, 0, 32, 16) doubles them on the target
        ov.draw([DrawList(quad, idx, [DrawCommand(t, clip, 0, 6)])], display=(0, 0, 32, 16), index_size=2)
        a = ov.render()
        want = np.zeros((32, 64, 4), np.uint8)
        want[..., 3] = 255
        want[4:24, 8:40] = (255, 128, 0, 255)
        assert np.array_equal(a, want)
        t.update(np.zeros((1, 1), np.uint8))  # alpha 0: the quad vanishes, even from the same recording
        assert (ov.render()[..., :3] == 0).all()


def test_mistakes_get_clear_errors(device):
    with ImGuiRenderer(size=(32, 32)) as ui:
        with pytest.raises(TypeError, match="uint8"):
            ui.add_texture(np.zeros((4, 4, 4), np.float32))
        with pytest.raises(ValueError, match=r"\(h, w, 4\)"):
            ui.add_texture(np.zeros((4, 4), np.uint8))
        with pytest.raises(ValueError, match="unknown texture filter"):
            ui.add_texture(np.zeros((4, 4, 4), np.uint8), filter="cubic")
        with Canvas(8, 8) as canvas:
            tex = ui.add_canvas_texture(canvas)
            ui.new_frame(dt=DT)
            imgui.get_foreground_draw_list().add_image(tex, (0, 0), (8, 8))
            with pytest.raises(ValueError, match="never drawn"):
                ui.render()
    ui.close()  # a second close does nothing
    with pytest.raises(ValueError, match="closed"):
        ui.new_frame()
    with pytest.raises(ValueError, match="size="):
        ImGuiRenderer()
    with Overlay(8, 8, device=device) as ov, pytest.raises(ValueError, match="index_size"):
        ov.draw([], index_size=3)


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="Xvfb is not installed (apt-get install xvfb)")
def test_window_shows_the_frame(tmp_path, artifacts):
    from PIL import ImageGrab

    from caliper_vk.engine.window import Window

    with xvfb("640x480x24") as display:
        window = Window((240, 160), title="imgui")
        try:
            with ImGuiRenderer(window=window) as ui:
                steps = np.arange(50.0)
                build = dashboard(ui.add_texture(np.full((4, 4, 4), 200, np.uint8)), steps, steps[::-1].copy())
                shown = 0
                for _ in range(200):
                    ui.new_frame(dt=DT)
                    build()
                    shown += ui.present()  # False when no swapchain image is free yet
                    if shown == 3:
                        break
                    time.sleep(0.005)
                assert shown == 3
                frame = ui.overlay.read_back()
                assert len(np.unique(frame.reshape(-1, 4), axis=0)) > 20  # the UI, not a blank frame
                time.sleep(0.3)  # let the X server finish the presentation
                x, y = window.position()
                shot = np.asarray(ImageGrab.grab(xdisplay=display))[y:y + 160, x:x + 240]
                rgb = np.concatenate([shot[..., :3], np.full((160, 240, 1), 255, np.uint8)], axis=2)
                assert_same_image(rgb, frame, artifacts)
        finally:
            window.close()


def test_a_cpu_devices_target_is_read_in_place_and_equals_the_readback_copy(monkeypatch):
    """On lavapipe the overlay's target is linear host memory read in place (no 13 MB copy per
    frame); the same frame through the readback buffer (as on a GPU) is byte for byte the same,
    and a width whose rows are not tightly packed falls back to the copy."""
    from caliper_vk.engine import overlay_target

    def draw(size):
        with ImGuiRenderer(size=size) as ui:
            steps = np.arange(40.0)
            tex = ui.add_texture(np.arange(64, dtype=np.uint8).reshape(4, 4, 4) * 4)
            rgba = frames(ui, dashboard(tex, steps, np.cos(steps / 6)), n=2)
            ov = ui.overlay
            assert (ov.image.host is None) == (ov._readback is not None)  # one or the other
            return rgba, ov.image.host is not None, ov.device

    in_place, host, device = draw((320, 240))
    assert host == overlay_target._linear_allowed(device, 320, 240)  # lavapipe (no profile): True
    monkeypatch.setattr(overlay_target, "_linear_allowed", lambda *a: False)
    copied, host, _ = draw((320, 240))
    assert not host
    assert np.array_equal(in_place, copied)
    assert len(np.unique(in_place.reshape(-1, 4), axis=0)) > 20  # a drawn frame, not a blank one
    monkeypatch.undo()
    with Overlay(333, 77, clear=(9, 8, 7, 255)) as ov:  # lavapipe pads 333-pixel rows
        assert (ov.image.host is None) == (ov._readback is not None)
        assert (ov.render() == (9, 8, 7, 255)).all()
        ov.resize(64, 32)
        assert (ov.render(copy=False) == (9, 8, 7, 255)).all()


def test_a_cpu_devices_passes_split_by_triangles_draw_the_same_pixels(monkeypatch):
    """On a CPU device the overlay ends and resumes its render pass every CPU_PASS_TRIANGLES
    triangles (llvmpipe's binning memory grows with a pass's triangles): the frame is the same,
    byte for byte, as one pass, with overlapping blended triangles and texture changes across the
    splits."""
    from caliper_vk.engine import overlay as overlay_module

    rng = np.random.default_rng(7)
    n = 3000  # quads: 6000 triangles, blended over each other
    xy = rng.uniform(0, 180, (n, 2)).astype(np.float32)
    quad = np.zeros(4 * n, VERTEX_DTYPE)
    corners = np.array([(0, 0), (12, 0), (12, 9), (0, 9)], np.float32)
    quad["position"] = (xy[:, None, :] + corners).reshape(-1, 2)
    quad["uv"] = np.tile([(0, 0), (1, 0), (1, 1), (0, 1)], (n, 1)).astype(np.float32)
    quad["color"] = np.repeat(rng.integers(0, 256, (n, 4)), 4, axis=0).astype(np.uint8)
    idx = (np.arange(n)[:, None] * 4 + np.array([0, 1, 2, 0, 2, 3])).reshape(-1).astype(np.uint32)

    def frame(split):
        monkeypatch.setattr(overlay_module, "CPU_PASS_TRIANGLES", split)
        with Overlay(200, 200, clear=(5, 10, 20, 255)) as ov, \
                Texture(ov.device, 2, 2, pixels=np.full((2, 2, 4), 255, np.uint8)) as white, \
                Texture(ov.device, 2, 2, pixels=rng.integers(0, 256, (2, 2, 4), dtype=np.uint8)) as noise:
            third = len(idx) // 3
            cmds = [DrawCommand(white, (0, 0, 200, 200), 0, third),
                    DrawCommand(noise, (10, 10, 190, 190), third, third),
                    DrawCommand(white, (0, 0, 200, 200), 2 * third, len(idx) - 2 * third)]
            ov.draw([DrawList(quad, idx, cmds)])
            return ov.render()

    state = rng.bit_generator.state
    one = frame(10 ** 9)
    rng.bit_generator.state = state  # the same noise texture
    split = frame(700)  # a pass every 700 triangles: several in each command
    assert np.array_equal(one, split)
    assert len(np.unique(one.reshape(-1, 4), axis=0)) > 100


def test_a_frame_after_a_completed_one_reuses_its_buffers(monkeypatch):
    """Offscreen frames (a PNG, the web page, a cursor move) wait for each frame: the next one
    reuses its vertex and index buffers; only a frame drawn while the last may still run takes
    the other pair (a window's frames overlap)."""
    quad = np.zeros(4, VERTEX_DTYPE)
    quad["position"] = [(8, 8), (24, 8), (24, 24), (8, 24)]
    quad["color"] = (255, 0, 0, 255)
    idx = np.array([0, 1, 2, 0, 2, 3], np.uint32)
    with Overlay(64, 32) as ov, Texture(ov.device, 1, 1, pixels=np.full((1, 1, 4), 255, np.uint8)) as t:
        lists = [DrawList(quad, idx, [DrawCommand(t, (0, 0, 64, 32), 0, 6)])]
        for _ in range(3):
            ov.draw(lists)
            frame = ov.render()
        first, other = ov._slots
        assert ov._current is first and other.vertices is None  # one pair made, three frames
        monkeypatch.setattr(ov.device, "is_done", lambda serial: False)  # as if still running
        ov.draw(lists)
        assert ov._current is other and other.vertices is not None
        monkeypatch.undo()
        assert np.array_equal(ov.render(), frame)
