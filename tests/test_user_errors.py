"""Mistakes a newcomer makes get one line that names the problem and the fix, never a traceback,
and never stop a training loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

import caliper_vk as cv
from caliper_vk import cli
from caliper_vk.record.log import read_log
from caliper_vk.record.log import RunFileError


@pytest.fixture
def heat(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(256, dtype=np.float32).reshape(16, 16))
    return path


def test_render_writes_jpeg_and_refuses_an_unknown_suffix_in_one_line(heat, tmp_path, capsys):
    out = tmp_path / "x.jpg"
    assert cli.main(["render", "--view", "heatmap", "--input", str(heat), "--out", str(out), "--size",
                     "64x48"]) == 0
    with Image.open(out) as im:
        assert im.format == "JPEG" and im.size == (64, 48)
    assert cli.main(["render", "--view", "heatmap", "--input", str(heat), "--out",
                     str(tmp_path / "x.gif")]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write a .gif image" in err[0] and ".png" in err[0], err


def test_render_takes_bins_auto_as_the_python_api_does(heat, tmp_path):
    assert cli.main(["render", "--view", "histogram", "--input", str(heat), "--out",
                     str(tmp_path / "h.png"), "--bins", "auto", "--size", "64x48"]) == 0
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["render", "--bins", "many"])


def test_a_missing_extra_is_one_line_naming_it(monkeypatch, tmp_path, capsys):
    from caliper_vk.live.sinks import video

    monkeypatch.setitem(__import__("sys").modules, "av", None)  # PyAV not installed
    with pytest.raises(ImportError, match=r"pip install 'caliper-vk\[video\]'"):
        video._av()
    run = tmp_path / "run"
    rec = cv.Recorder(run, config={})
    rec.log({"loss": 1.0}, step=0)
    rec.probe("act", np.ones((4, 4), np.float32), step=0)
    rec.close()
    assert cli.main(["render", str(run), "-o", str(tmp_path / "x.mp4")]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("caliper: error: ") and "caliper-vk[video]" in err[-1], err


def test_a_missing_optional_module_found_by_name_says_its_extra():
    exc = ModuleNotFoundError("No module named 'websockets'", name="websockets")
    assert cli._missing_package(exc) == ("this needs the optional package 'websockets': "
                                         "pip install 'caliper-vk[web]'")
    assert cli._missing_package(ModuleNotFoundError("x", name="caliper_vk.nope")) is None  # a bug, not a user's


def test_an_option_typo_names_the_nearest_option_and_lists_them():
    with cv.Session(window=False, size=(64, 48)) as s:
        with pytest.raises(TypeError, match=r"no option 'colourmap' \(did you mean 'colormap'\?\); "
                                            r"its options: .*value_range"):
            s.attach(torch.zeros(4, 4), "heatmap", colourmap="magma")


def test_step_after_close_draws_nothing_and_says_so_once():
    s = cv.Session(window=False, size=(64, 48))
    s.attach(torch.zeros(4, 4), "heatmap")
    assert s.step() is True
    s.close()
    with pytest.warns(UserWarning, match="session is closed"):
        assert s.step() is False
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert s.step() is False and s.due() is False  # said once; never an exception


def test_a_garbage_log_is_called_what_it_is(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"garbage\nmore{{\n")
    with pytest.raises(RunFileError, match=r"not a Caliper run log: none of its lines is a valid record "
                                           r"\(log.jsonl line 1: no checksum"):
        read_log(path)
    path.write_bytes(b"")
    with pytest.raises(RunFileError, match="empty log"):
        read_log(path)


def test_a_notebook_session_draws_no_faster_than_its_widget_shows():
    from caliper_vk.live.sinks import LIVE_FPS, Sinks
    from caliper_vk.live.sinks.notebook import MAX_FPS, NotebookSink
    from caliper_vk.live.sinks.web import WebSink

    page, widget = object.__new__(WebSink), object.__new__(NotebookSink)
    assert Sinks([page]).live_fps == LIVE_FPS == 30
    assert Sinks([widget]).live_fps == MAX_FPS == 15  # the status line said "≤30 fps" here
    assert Sinks([page, widget]).live_fps == 15
