"""`caliper view --web`: the dashboard served to a real headless Chromium, mouse input back to Dear ImGui."""

from __future__ import annotations

import threading
import time

import pytest
from chromium import Browser, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="needs chromium (tools/bootstrap.sh installs it)")


def test_web_dashboard_is_served_and_a_click_in_a_plot_moves_the_cursor():
    from caliper_vk.dashboard.app import Dashboard, open_runs
    from caliper_vk.dashboard.serve import serve
    from caliper_vk.runs import example_paths
    from caliper_vk.web import FrameServer

    runs = open_runs([p for p in example_paths() if p.parent.name == "digits_mlp"])
    dash = Dashboard(runs, size=(1000, 640), panels=["loss"])
    server = FrameServer(title="caliper view", port=0, announce=False)
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(dash, server), kwargs={"stop": stop}, daemon=True)
    browser = Browser(width=1100, height=760)
    try:
        thread.start()
        tab = browser.open(server.url)
        tab.wait_for("window.caliper.frames >= 1", timeout=60)
        assert tab.eval("[document.getElementById('frame').width, document.getElementById('frame').height]") \
            == [1000, 640]
        assert "caliper view" in tab.eval("document.getElementById('status').textContent")
        before = dash.cursor
        left, top = tab.eval("(r => [r.left, r.top])(document.getElementById('frame').getBoundingClientRect())")
        x, y = left + 500, top + 150  # inside the loss plot (x 392..645, y 115..190), left of the cursor
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            browser.call("Input.dispatchMouseEvent", tab.session, type=kind, x=x, y=y, button="left",
                         buttons=1 if kind == "mousePressed" else 0, clickCount=1)
        deadline = time.monotonic() + 60
        while dash.cursor == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert dash.cursor < before  # the click went through the page to ImPlot's cursor
        status = "document.getElementById('status').textContent"
        tab.wait_for(f"{status}.includes('cursor at step {dash.cursor:g}')", timeout=30)
    finally:
        stop.set()
        thread.join(timeout=30)
        browser.close()
        server.close()
        dash.close()
