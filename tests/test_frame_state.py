"""The live helpers alone, through the seam caliper_vk/live/frame_state.py names: a stand-in
session with a FrameState and LoopHost's calls, no device and no window."""

from types import SimpleNamespace

from caliper_vk.live.frame_state import FrameState
from caliper_vk.live.status import refresh_chrome
from caliper_vk.live.windowing import minimised, window_closed


class Host:
    """A stand-in for a Session: the loop's flags and a record of the calls made on it."""

    def __init__(self, **attrs):
        self.frame = FrameState()
        self.calls: list[str] = []
        self.message, self.skipped, self.panels = "", 0, []
        self.__dict__.update(attrs)

    def wait_idle(self):
        self.calls.append("wait_idle")

    def collect(self):
        self.calls.append("collect")
        self.frame.inflight = False


def test_a_closed_window_is_said_once_and_waits_for_the_frame_in_flight():
    host = Host(window=SimpleNamespace(lost=False))
    window_closed(host)
    window_closed(host)
    assert host.frame.window_gone and host.message == "window closed; drawing stopped"
    assert host.calls == ["wait_idle"]
    lost = Host(window=SimpleNamespace(lost=True))
    window_closed(lost)
    assert lost.message == "display lost; drawing stopped"


def test_a_minimised_window_skips_and_collects_only_a_finished_frame():
    busy = Host(canvas=SimpleNamespace(done=lambda: False))
    busy.frame.inflight = True
    assert minimised(busy) is False
    assert busy.calls == [] and busy.skipped == 1 and busy.frame.inflight
    done = Host(canvas=SimpleNamespace(done=lambda: True))
    done.frame.inflight = True
    assert minimised(done) is False
    assert done.calls == ["collect"] and done.skipped == 1 and not done.frame.inflight


def test_the_status_line_is_made_a_few_times_a_second_or_when_the_message_changes():
    lines = []
    bar = SimpleNamespace(columns=80, set_text=lambda text, warn: lines.append((text, warn)))
    host = Host(status_bar=bar, status=lambda: SimpleNamespace(line=lambda columns: f"{columns} cols"))
    refresh_chrome(host, now=10.0)
    refresh_chrome(host, now=10.1)  # within 0.25 s, the same message: not made again
    assert lines == [("80 cols", False)] and host.frame.status_time == 10.0
    host.message = "cloud stopped"
    refresh_chrome(host, now=10.2)
    refresh_chrome(host, now=10.3, force=True)  # a frame that leaves the process
    refresh_chrome(host, now=10.6)
    assert lines == [("80 cols", False)] + [("80 cols", True)] * 3
    assert host.frame.status_message == "cloud stopped"
