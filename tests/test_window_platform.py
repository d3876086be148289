"""Where a window may open: macOS's main-thread rule and a login with no window server, simulated.

AppKit aborts the process (SIGABRT) when a window is made off the main thread, so the decision is
a pure function (``window_refusal``) made before GLFW is touched; a session asked for no window in
particular falls back to offscreen and says why.
"""

import threading
import types

import pytest

import caliper_vk as cv
from caliper_vk.engine import display
from caliper_vk.engine import window as win
from caliper_vk.engine.instance import NoDeviceError
from caliper_vk.engine.window import window_refusal


def test_the_decision():
    assert window_refusal("darwin", True, True, {}) is None  # no DISPLAY needed on a Mac
    assert "main thread" in window_refusal("darwin", False, True, {})
    assert "no window server" in window_refusal("darwin", True, False, {"DISPLAY": ":0"})
    assert window_refusal("win32", False, True, {}) is None
    assert "no display" in window_refusal("linux", True, True, {})
    assert window_refusal("linux", False, True, {"WAYLAND_DISPLAY": "wayland-0"}) is None
    assert window_refusal("linux", True, True, {"DISPLAY": ":1"}) is None


@pytest.fixture
def mac(monkeypatch):
    """This process as a Mac sees it; GLFW must not be reached when a window is refused."""
    import glfw

    monkeypatch.setattr(display, "sys", types.SimpleNamespace(platform="darwin"))
    monkeypatch.setattr(display, "_macos_gui_session", lambda: True)

    def aborts(*args):
        raise AssertionError("GLFW was initialised where AppKit would abort the process")

    monkeypatch.setattr(glfw, "init", aborts)
    return monkeypatch


def in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out


def test_off_the_main_thread_a_session_renders_offscreen_and_says_why(mac, capsys):
    def offscreen():
        with cv.Session(size=(64, 48), budget=None, history=None) as s:
            return s.window, s.window_refused, cv.live.display_available()

    out = in_thread(offscreen)
    assert "error" not in out, out.get("error")
    window, refused, available = out["value"]
    assert window is None and not available
    assert "not on the main thread" in refused
    err = capsys.readouterr().err
    assert "rendering offscreen" in err and "main thread" in err


def test_a_window_asked_for_off_the_main_thread_is_refused_not_aborted(mac):
    out = in_thread(lambda: win.Window((64, 48)))
    assert isinstance(out.get("error"), NoDeviceError)
    assert "main thread" in str(out["error"]) and "window=False" in str(out["error"])


def test_over_ssh_with_no_window_server_the_session_renders_offscreen(mac):
    mac.setattr(display, "_macos_gui_session", lambda: False)
    with cv.Session(size=(64, 48), budget=None, history=None) as s:
        assert s.window is None and "no window server" in s.window_refused
