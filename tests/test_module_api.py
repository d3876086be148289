"""The module-level API (``caliper_vk.attach``, ``step``, ``due``, ``session``) acts on the session the
user opened, the innermost one still open; a default session is made only when none is, and its
frames go to a folder of their own per run."""

from __future__ import annotations

import pytest
import torch

import caliper_vk as cv
from caliper_vk import api

SIZE = (160, 120)


@pytest.fixture
def no_display(monkeypatch, tmp_path):
    monkeypatch.setattr(api, "_session", None)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_module_api_uses_the_session_the_user_opened(no_display):
    with cv.Session(window=False, size=SIZE) as s:
        assert cv.session() is s
        panel = cv.attach(torch.zeros(40, 3), "pointcloud", name="x")
        assert panel in s.panels
        assert cv.due() is s.due()
        assert cv.step() is True
        s.flush()
        assert s.frames == 1
        assert api._session is None, "no default session may be made while one is open"
    assert not (no_display / "caliper-frames").exists()


def test_the_innermost_open_session_wins_and_closing_it_falls_back(no_display):
    with cv.Session(window=False, size=SIZE) as outer:
        inner = cv.Session(window=False, size=SIZE)
        try:
            assert cv.session() is inner
            cv.attach(torch.zeros(8, 8), "heatmap", name="h")
            assert [p.name for p in inner.panels] == ["h"] and outer.panels == []
        finally:
            inner.close()
        assert cv.session() is outer
        inner.close()  # a second close is harmless and changes nothing
        assert cv.session() is outer
    assert cv.step() is False  # nothing open: nothing drawn, nothing made


def test_default_sessions_write_each_run_to_a_new_folder_and_say_where(no_display, capsys):
    dirs = []
    for _ in range(2):
        s = cv.session()
        try:
            cv.attach(torch.zeros(40, 3), "pointcloud", name="x")
            assert cv.step(0) is True
            s.flush()
            dirs.append(s.out_dir)
        finally:
            s.close()
    err = capsys.readouterr().err
    assert dirs[0] != dirs[1] and all(d.parent.name == "caliper-frames" for d in dirs)
    for d in dirs:
        assert f"writing a frame every 10 steps to {d}/" in err
        assert sorted(p.name for p in d.iterdir()) == ["frame_000000.png"]
