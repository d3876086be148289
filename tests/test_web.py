"""Session(window="web") in a real headless Chromium (Debian's), driven over the DevTools protocol."""

from __future__ import annotations

import io
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch
from PIL import Image

from caliper_vk.live import Session

from chromium import Browser, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="needs chromium (tools/bootstrap.sh installs it)")

SIZE = (320, 200)


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def session():
    s = Session(window="web", size=SIZE, port=0, max_fps=None, budget=None)
    torch.manual_seed(0)
    points = torch.randn(400, 3)
    s.attach(points, view="pointcloud", labels=torch.arange(400) % 10)
    s.points = points
    yield s
    s.close()


def server(s):
    return s.sinks.get("web").server


def wait(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def drive_until(s, tab, step, timeout=30.0):
    """Step the session (moving the points) until the page has drawn ``step``; the
    session's frame of that step is then the last one it delivered."""
    deadline = time.monotonic() + timeout
    k = s.step_count
    while tab.eval("window.caliper.step") is None:
        assert time.monotonic() < deadline, "the page never drew a frame"
        k += 1
        s.points.mul_(0.999)
        s.step(k)
        time.sleep(0.01)
    s.points.add_(0.05 * torch.randn(s.points.shape))
    s.wait_idle()
    s.step(step)
    pixels = s.flush()  # collects the frame of `step` and hands it to the page
    tab.wait_for(f"window.caliper.step === {step}", timeout)
    return pixels


def page_rgb(tab):
    return np.asarray(Image.open(io.BytesIO(tab.canvas_png())).convert("RGB"))


def test_web_page_shows_the_frame_of_the_drawn_step(browser, session):
    server(session).image_format = "png"  # lossless: the page must hold the exact bytes
    tab = browser.open(session.url)
    try:
        wait(lambda: server(session).viewers == 1)
        first = drive_until(session, tab, 500)
        assert np.array_equal(page_rgb(tab), first[..., :3])
        status = tab.eval("document.getElementById('status').textContent")
        assert "step 500" in status and "pointcloud0: zero-copy" in status
        second = drive_until(session, tab, 501)
        assert not np.array_equal(first, second)  # the points moved: a stale page would fail
        assert np.array_equal(page_rgb(tab), second[..., :3])
    finally:
        tab.close()


def test_web_jpeg_frames_match_within_codec_loss_and_two_tabs_work(browser, session):
    tabs = [browser.open(session.url) for _ in range(2)]
    try:
        wait(lambda: server(session).viewers == 2)
        before = drive_until(session, tabs[0], 699)[..., :3].astype(int)
        pixels = drive_until(session, tabs[0], 700)[..., :3].astype(int)
        tabs[1].wait_for("window.caliper.step === 700")
        moved = np.any(before != pixels, axis=-1)  # where the two steps' frames differ
        assert moved.sum() > 100
        for tab in tabs:
            page = page_rgb(tab).astype(int)
            assert np.abs(page - pixels).mean() < 2.0  # JPEG's loss, over the whole frame
            # where the steps differ, the page holds step 700's pixels, not step 699's
            assert np.abs(page - pixels)[moved].mean() * 3 < np.abs(page - before)[moved].mean()
        assert server(session).sent >= 2
    finally:
        for tab in tabs:
            tab.close()


def test_web_wrong_token_or_origin_is_refused(browser, session):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url = session.url
    good = url.split("token=")[1]
    wrong = ("y" if good[0] == "x" else "x") + good[1:]  # one character off (tokens are random)
    for bad in (url.replace(good, wrong), url.split("?")[0]):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(bad, timeout=10)
        assert err.value.code == 403
        with pytest.raises(InvalidStatus) as err, \
                connect(bad.replace("http://", "ws://").replace("/?", "/ws?"), open_timeout=10):
            pass
        assert err.value.response.status_code == 403
    with urllib.request.urlopen(url, timeout=10) as ok:  # the right token: the page, and no CORS
        assert ok.status == 200 and not any(k.lower().startswith("access-control") for k in ok.headers)
    ws_url = url.replace("http://", "ws://").replace("/?", "/ws?")
    with pytest.raises(InvalidStatus) as err, connect(ws_url, origin="http://evil.example", open_timeout=10):
        pass
    assert err.value.response.status_code == 403
    tab = browser.open(url.replace(good, "wrong"))  # a real browser with a wrong token gets no page
    try:
        tab.wait_for("document.body && document.body.innerText.includes('lacks the session')")
        for k in range(5):
            session.step(k)
        assert tab.eval("window.caliper === undefined") and server(session).viewers == 0
    finally:
        tab.close()
    assert server(session).refused >= 6


def test_web_input_from_the_page_moves_the_camera_and_pauses(browser, session):
    tab = browser.open(session.url)
    try:
        wait(lambda: server(session).viewers == 1)
        drive_until(session, tab, 10)
        view = session.panels[0].view
        yaw = view.camera[0]
        call = browser.call
        left, top = tab.eval("(r => [r.left, r.top])(document.getElementById('frame').getBoundingClientRect())")
        moves = (("mousePressed", 100), ("mouseMoved", 130), ("mouseMoved", 160), ("mouseReleased", 160))
        for kind, x in moves:
            call("Input.dispatchMouseEvent", tab.session, type=kind, x=left + x, y=top + 100, button="left",
                 buttons=0 if kind == "mouseReleased" else 1, clickCount=1)
        for kind in ("keyDown", "keyUp"):
            call("Input.dispatchKeyEvent", tab.session, type=kind, code="Space", key=" ",
                 windowsVirtualKeyCode=32)
        wait(lambda: (session.step(), session.paused)[1] and view.camera[0] != yaw)
        assert view.camera[0] > yaw  # a drag to the right turns the cloud as in a window
        tab.wait_for("document.getElementById('status').textContent.includes('PAUSED')")
    finally:
        tab.close()


def test_web_closed_tab_costs_nothing(browser, session):
    tab = browser.open(session.url)
    wait(lambda: server(session).viewers == 1)
    drive_until(session, tab, 20)
    tab.close()
    wait(lambda: server(session).viewers == 0)
    srv = server(session)
    published, frames, held = srv.published, session.frames, session.held
    t0 = time.perf_counter()
    drawn = 0
    for k in range(21, 61):
        session.points.mul_(0.999)  # training goes on
        assert not session.due(k + 1)  # a loop can skip what it computes only to draw
        drawn += session.step(k)
    session.wait_idle()
    # nobody watches: nothing drawn, read back, encoded or queued
    assert drawn == 0 and session.frames == frames and session.held == held + 40
    assert session.step_count == 60 and srv.published == published and len(srv.events()) == 0
    assert time.perf_counter() - t0 < 20
    tab = browser.open(session.url)  # a new tab: drawing resumes
    try:
        wait(lambda: server(session).viewers == 1)
        assert session.due(61)
        drive_until(session, tab, 70)
    finally:
        tab.close()
