"""``memory/rss_bytes`` where it cannot be measured (no /proc, no psutil: a Mac or a Windows PC
without the ``memory`` extra) is said, in the log and in the metric's definition, not left silent."""

import importlib

import torch

import caliper_vk as cv
from caliper_vk.record import load_run

watch_module = importlib.import_module("caliper_vk.record.watch")  # the module, not the function


def run(tmp_path, defined=None):
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = cv.Recorder(tmp_path / "run")
    define, defined = rec.define, {} if defined is None else defined
    rec.define = lambda name, **kw: defined.update({name: kw}) or define(name, **kw)
    cv.watch(model, opt, rec, histograms_every=None)
    for _ in range(2):
        loss = model(torch.randn(8, 4)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.log(train_loss=loss)
    rec.close()
    return load_run(tmp_path / "run")


def test_unmeasurable_rss_is_said(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(watch_module, "_rss_bytes", lambda: None)
    defined = {}
    r = run(tmp_path, defined)
    assert "memory/rss_bytes is not recorded: this platform has no /proc/self/statm" in capsys.readouterr().err
    assert "memory/rss_bytes" not in r.metrics  # missing stays missing (never a zero)
    description = defined["memory/rss_bytes"]["description"]
    assert "not measured in this run" in description and "caliper-vk[memory]" in description


def test_measured_rss_is_recorded_quietly(tmp_path, capsys):
    r = run(tmp_path)
    assert "rss_bytes" not in capsys.readouterr().err
    assert r.metrics["memory/rss_bytes"].value.size == 2 and "not measured" not in r.metrics[
        "memory/rss_bytes"].description
