"""The memory watch adds to a bf16 model: at most 1% of the parameters' bytes plus fixed buffers
(the temporaries of one piece of :data:`devstats.CHUNK` elements), counted at the source by
:class:`~caliper_vk.record.footprint.HookFootprint` (bench/recording.py's memory row at 100M
parameters; here at a small size, with small pieces, so that a copy of the model would show)."""

import pytest
import torch

from caliper_vk.record import Recorder, devstats, watch
from caliper_vk.record.footprint import HookFootprint

PIECE_BYTES_PER_ELEMENT = 16  # a piece in float32, its int32 bins, its masks: the fixed buffers


def _train(tmp_path, chunk, monkeypatch):
    monkeypatch.setattr(devstats, "CHUNK", chunk)
    torch.manual_seed(0)
    layers = [torch.nn.Linear(512, 512, bias=False, dtype=torch.bfloat16) for _ in range(8)]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(4, 512, dtype=torch.bfloat16)
    rec = Recorder(tmp_path / "run")
    watcher = watch(model, opt, rec, histograms_every=1, budget=None)  # every record, every step
    footprint = HookFootprint(watcher)
    for _ in range(3):
        opt.zero_grad()
        model(x).float().square().mean().backward()
        opt.step()
    footprint.remove()
    rec.close()
    return footprint, sum(2 * p.numel() for p in model.parameters())


def test_watch_adds_at_most_one_percent_of_a_bf16_model_plus_fixed_buffers(tmp_path, monkeypatch):
    chunk = 1 << 14
    footprint, param_bytes = _train(tmp_path, chunk, monkeypatch)
    assert footprint.tensors > 100  # the hooks' operators were seen
    assert footprint.peak_bytes <= 0.01 * param_bytes + PIECE_BYTES_PER_ELEMENT * chunk, (
        footprint.peak_bytes, param_bytes)
    assert footprint.live_bytes < footprint.peak_bytes  # the temporaries were freed


def test_a_copy_of_the_model_in_the_hooks_is_what_the_footprint_catches(tmp_path, monkeypatch):
    """Negative control: a hook that keeps a bf16 copy of every tensor it takes the norm of (what a
    snapshot for the update ratio would be) breaks the bound."""
    kept = []
    original = devstats.norms

    def norms_keeping_a_copy(tensors, device=None):  # called inside watch's hooks: counted
        kept[:] = [t.detach().clone() for t in tensors]
        return original(tensors, device)

    monkeypatch.setattr(devstats, "norms", norms_keeping_a_copy)
    chunk = 1 << 14
    footprint, param_bytes = _train(tmp_path, chunk, monkeypatch)
    assert footprint.peak_bytes > 0.01 * param_bytes + PIECE_BYTES_PER_ELEMENT * chunk


def test_the_footprint_needs_the_watchers_hooks(tmp_path):
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = watch(model, opt, Recorder(tmp_path / "run"), histograms_every=None)
    watcher.remove()
    with pytest.raises(RuntimeError, match="hooks were not found"):
        HookFootprint(watcher)
