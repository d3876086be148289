"""The web frame server without a browser: page messages → window events, ports, the slot."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from caliper_vk.web.keys import event_from_message, glfw_code

pytest.importorskip("websockets", reason="needs websockets (the [web] extra)")


def test_web_page_messages_become_window_events():
    assert glfw_code("KeyR") == ord("R") and glfw_code("Digit7") == ord("7") and glfw_code("Space") == 32
    assert glfw_code("Escape") == 256 and glfw_code("F2") == 291 and glfw_code("Nonsense") == -1
    ev = event_from_message({"type": "key", "code": "KeyR", "mods": 2})
    assert (ev.kind, ev.key, ev.code, ev.mods) == ("key", "r", ord("R"), 2)
    assert event_from_message({"type": "key", "code": "Space"}).key == "space"
    ev = event_from_message({"type": "drag", "x": 10, "y": 20, "dx": 3, "dy": -1})
    assert (ev.kind, ev.x, ev.y, ev.dx, ev.dy) == ("drag", 10.0, 20.0, 3.0, -1.0)
    ev = event_from_message({"type": "button", "x": 1, "y": 2, "button": 0, "down": True})
    assert (ev.kind, ev.button, ev.down) == ("button", 0, True)
    assert event_from_message({"type": "char", "text": "ab"}).text == "a"
    # anything malformed or unknown is dropped, never raised into the server thread
    for bad in ({"type": "eval"}, {}, {"type": "move", "x": "nan?"}, {"type": "char", "text": ""}):
        ev = event_from_message(bad)
        assert ev is None or (ev.kind == "move" and ev.x == 0.0)
    assert event_from_message({"type": "scroll", "dy": float("inf")}).dy == 0.0


def test_web_server_port_in_use_says_so_and_publish_never_waits():
    from caliper_vk.web import FrameServer

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=rf"cannot serve frames on 127.0.0.1:{port}.*port=0"):
            FrameServer(port=port, announce=False)
    server = FrameServer(port=0, announce=False)
    try:
        assert server.url.startswith(f"http://127.0.0.1:{server.port}/?token=") and len(server.token) >= 24
        assert not server.wants_frame()
        frame = np.zeros((8, 8, 4), np.uint8)
        for k in range(1000):  # no tab: each publish replaces the slot, nothing is encoded or kept
            server.publish(frame, step=k)
        assert server.published == 1000 and server.encoded == 0 and server._frame.seq == 1000
    finally:
        server.close()
    server.close()  # a second close does nothing
