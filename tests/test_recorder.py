"""Recorder and watch(): every recorded value checked against an independent computation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from caliper_vk.record import Recorder, RunFileError, histogram_counts, load_run, watch
from caliper_vk.record.log import encode_line, read_log


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 4))


def _train(tmp_path, steps=12, clip=None, lr=0.2, optim="sgd", **watch_options):
    model = _model()
    opt = (torch.optim.SGD if optim == "sgd" else torch.optim.Adam)(model.parameters(), lr=lr)
    rec = Recorder(tmp_path / "run", config={"clip": clip}, steps_per_epoch=4)
    w = watch(model, opt, rec, clip=clip, **watch_options)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 6, generator=g), torch.randint(0, 4, (32,), generator=g)
    truth = {"grad": [], "weight": [], "ratio": [], "preclip": [], "loss": []}
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            pre = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters()))
            truth["preclip"].append(pre)
            w.clip_grad_norm_()
        grads = [p.grad.detach().double().numpy().copy() for p in model.parameters()]
        before = [p.detach().double().numpy().copy() for p in model.parameters()]
        opt.step()
        after = [p.detach().double().numpy().copy() for p in model.parameters()]
        truth["grad"].append([np.sqrt((g_ ** 2).sum()) for g_ in grads])
        truth["weight"].append([np.sqrt((a ** 2).sum()) for a in after])
        num = np.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(after, before, strict=True)))
        den = np.sqrt(sum((a ** 2).sum() for a in after))
        truth["ratio"].append(num / max(den, 1e-12))
        truth["loss"].append(loss.item())
        rec.log(train_loss=loss)
    return model, rec, w, truth, (x, y)


def test_norms_and_update_ratio_match_independent_computation(tmp_path):
    model, rec, _, truth, _ = _train(tmp_path)
    rec.close()
    run = load_run(tmp_path / "run")
    names = [n for n, _ in model.named_parameters()]
    for i, name in enumerate(names):
        s = run.metrics[f"grad_norm/{name}"]
        np.testing.assert_array_equal(s.step, np.arange(1, 13))
        np.testing.assert_allclose(s.value, [t[i] for t in truth["grad"]], rtol=1e-12)
        np.testing.assert_allclose(run.metrics[f"weight_norm/{name}"].value, [t[i] for t in truth["weight"]],
                                   rtol=1e-12)
    np.testing.assert_allclose(run.metrics["grad_norm/global"].value,
                               [math.sqrt(sum(v * v for v in t)) for t in truth["grad"]], rtol=1e-12)
    np.testing.assert_allclose(run.metrics["update_ratio/global"].value, truth["ratio"], rtol=1e-9)
    # weights and biases stay separate series: no module totals are invented
    assert "grad_norm/0" not in run.metrics and "grad_norm/0.bias" in run.metrics
    assert run.metrics["lr/group0"].value.tolist() == [0.2] * 12
    np.testing.assert_allclose(run.metrics["train/loss"].value, truth["loss"], rtol=1e-6)


def test_run_json_gets_the_permissions_of_an_ordinary_file(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        Recorder(tmp_path / "r").close()
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "r" / "run.json").stat().st_mode)
    assert mode == 0o644, oct(mode)  # readable by the team, like log.jsonl (mkstemp gave 0600)


def test_host_info_can_be_left_out_of_a_shared_run(tmp_path):
    import socket

    Recorder(tmp_path / "a").close()
    Recorder(tmp_path / "b", host_info=False).close()
    header = [json.loads((tmp_path / r / "log.jsonl").read_text().splitlines()[0].split("\t")[0])
              for r in ("a", "b")]
    host_a, host_b = (h.get("host") or h["header"]["host"] for h in header)
    assert host_a["hostname"] == socket.gethostname() and "argv" in host_a and "pid" in host_a
    assert set(host_b) == {"platform", "python"}


def test_weight_norms_are_kept_without_update_ratios(tmp_path):
    model, rec, _, truth, _ = _train(tmp_path, steps=5, update_ratio=False)
    rec.close()
    run = load_run(tmp_path / "run")
    first = next(n for n, _ in model.named_parameters())
    np.testing.assert_allclose(run.metrics[f"weight_norm/{first}"].value, [t[0] for t in truth["weight"]],
                               rtol=1e-12)
    assert "weight_norm/global" in run.metrics
    assert not [k for k in run.metrics if k.startswith("update_ratio/")]


def test_clipping_statistics_count_norms_at_the_cap(tmp_path):
    _, rec, _, truth, _ = _train(tmp_path, clip=0.2, lr=0.5)
    rec.close()
    run = load_run(tmp_path / "run")
    pre = np.array(truth["preclip"])
    np.testing.assert_allclose(run.metrics["grad_norm/global_preclip"].value, pre, rtol=1e-6)
    hits = run.metrics["clip/hit"].value
    np.testing.assert_array_equal(hits, (pre >= 0.2 * (1 - 1e-5)).astype(float))
    stats = run.clipping(cap=0.2)
    post = np.minimum(pre, 0.2)
    assert stats["recorded"] == 12
    assert stats["at_cap"] == int(np.sum(pre >= 0.2))
    assert stats["min"] == pytest.approx(post.min(), rel=1e-6)
    assert 0 < stats["at_cap"] < 12  # the case is a real mix, so the count is tested


@pytest.mark.parametrize("values", [
    np.linspace(-4, 4, 101), np.array([-3.0, 3.0, 0.0, 2.9999999, -3.0000001, np.nan, np.inf, -np.inf]),
    np.random.default_rng(3).normal(0, 2, 5000), np.zeros(0)])
def test_histogram_counts_match_a_loop_over_bins(values):
    bins, lo, hi = 12, -3.0, 3.0
    expect = np.zeros(bins, np.int64)
    below = above = nan = inf = 0
    width = (hi - lo) / bins
    for v in values:
        if np.isnan(v):
            nan += 1
        elif np.isinf(v):
            inf += 1
        elif v < lo:
            below += 1
        elif v > hi:
            above += 1
        else:
            k = int((v - lo) // width) if v < hi else bins - 1
            expect[min(k, bins - 1)] += 1
    for src in (values, torch.from_numpy(values.astype(np.float64))):
        h = histogram_counts(src, bins, lo, hi)
        np.testing.assert_array_equal(h["counts"], expect)
        assert (h["below"], h["above"], h["nan"], h["inf"]) == (below, above, nan, inf)
        assert h["counts"].sum() + below + above + nan + inf == len(values)


def test_weight_histograms_recorded_with_out_of_range_counts(tmp_path):
    model, rec, _, _, _ = _train(tmp_path, steps=8, histograms_every=4)
    with torch.no_grad():
        model[0].weight[0, 0] = 7.5
    rec.histogram("weights/0.weight", model[0].weight)
    rec.close()
    run = load_run(tmp_path / "run")
    frames = run.histograms["weights/0.weight"]
    assert [f.step for f in frames] == [0, 4, 8, 8]
    last = frames[-1]
    assert last.above >= 1 and last.counts.sum() + last.below + last.above == model[0].weight.numel()
    np.testing.assert_allclose(last.edges, np.linspace(-3, 3, 13))


def test_dead_units_and_activation_statistics_from_the_validation_forward(tmp_path):
    model = _model()
    with torch.no_grad():  # unit 0 of the ReLU can never fire; unit 1 always fires
        model[0].weight[0].zero_()
        model[0].bias[0] = -1.0
        model[0].weight[1].zero_()
        model[0].bias[1] = 2.0
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    rec = Recorder(tmp_path / "run")
    w = watch(model, opt, rec, activations=["1"], histograms_every=None)
    x = torch.randn(50, 6, generator=torch.Generator().manual_seed(2))
    model(x).sum().backward()  # a training forward: not inspected
    opt.step()
    with w.validation():
        out = model[1](model[0](x))
        model(x)
    rec.close()
    run = load_run(tmp_path / "run")
    a = out.numpy()
    dead = int(np.sum(~(a != 0).any(axis=0)))
    assert dead >= 1
    assert run.metrics["act/dead_units/1"].value[-1] == dead
    which = run.arrays["act/dead/1"][-1]  # which units, not only how many
    np.testing.assert_array_equal(which.array, (~(a != 0).any(axis=0)).astype(np.uint8))
    assert (which.step, which.module, which.kind) == (1, "1", "dead units") and which.array[0] == 1
    assert run.metrics["act/dead_frac/1"].value[-1] == pytest.approx(dead / 12)
    assert run.metrics["act/zero_frac/1"].value[-1] == pytest.approx(np.mean(a == 0))
    assert run.metrics["act/std/1"].value[-1] == pytest.approx(a.astype(np.float64).std(), rel=1e-6)
    assert run.metrics["act/std/1"].step[-1] == 1


def test_best_so_far_plateau_epoch_mean_and_snapshots(tmp_path):
    rec = Recorder(tmp_path / "run", steps_per_epoch=2)
    val = [1.0, 0.8, 0.9, 0.7, 0.75, 0.75]
    losses = []
    for epoch, v in enumerate(val):
        for _ in range(2):
            rec.advance()
            loss = 1.0 / rec.step
            losses.append(loss)
            rec.log(train_loss=loss)
        rec.log(val_loss=v)
        rec.end_epoch()
        if epoch in (1, 4):
            rec.snapshot(f"epoch{epoch}.pt")
    rec.close()
    run = load_run(tmp_path / "run")
    steps, best = run.best_so_far()
    np.testing.assert_array_equal(steps, [2, 4, 6, 8, 10, 12])
    np.testing.assert_array_equal(best, np.minimum.accumulate(val))
    assert run.best_step() == 8 and run.snapshot_at(8) is None  # the best has no saved parameters
    assert run.snapshots == [(4, "epoch1.pt"), (10, "epoch4.pt")]
    assert run.metrics["plateau/count"].value.tolist() == [0, 0, 1, 0, 1, 2]
    means = run.metrics["train/loss_epoch_mean"]
    np.testing.assert_allclose(means.value, [np.mean(losses[i:i + 2]) for i in range(0, 12, 2)])
    assert "mean of the recorded step losses" in means.description
    np.testing.assert_allclose(run.coordinate("epoch", np.array([4, 12])), [2.0, 6.0])


def test_status_nonfinite_and_placeholders(tmp_path):
    rec = Recorder(tmp_path / "a")
    rec.log({"grad_norm/global": 0.0}, placeholder=("grad_norm/global",))
    rec.advance()
    rec.log({"train/loss": float("nan"), "grad_norm/global": 1.5})
    rec.close()
    run = load_run(tmp_path / "a")
    assert run.status == "nonfinite" and run.finite is False
    s = run.metrics["grad_norm/global"]
    assert s.placeholder.tolist() == [True, False]
    assert s.measured()[1].tolist() == [1.5]
    assert math.isnan(run.metrics["train/loss"].value[0])
    # the large-rate case: big but finite values are complete and finite
    rec = Recorder(tmp_path / "b")
    rec.log(train_loss=6.081645)
    rec.close()
    assert (load_run(tmp_path / "b").status, load_run(tmp_path / "b").finite) == ("complete", True)


def test_interrupted_and_killed_runs_keep_their_records(tmp_path):
    with pytest.raises(KeyboardInterrupt), Recorder(tmp_path / "a") as rec:
        rec.log(train_loss=1.0)
        raise KeyboardInterrupt
    assert load_run(tmp_path / "a").status == "interrupted"
    rec = Recorder(tmp_path / "b")
    rec.log(train_loss=1.0)
    with open(rec.log_path, "ab") as f:  # a record cut off mid-write, as a kill leaves it
        f.write(encode_line({"t": "scalars", "step": 1, "values": {"train/loss": 0.5}})[:-9])
    run = load_run(tmp_path / "b")
    assert run.status == "running" and run.metrics["train/loss"].value.tolist() == [1.0]
    assert any("incomplete last record" in p for p in run.problems)
    assert any("no end record" in p for p in run.problems)


def test_existing_run_is_never_overwritten_by_default(tmp_path):
    Recorder(tmp_path / "r").close()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        Recorder(tmp_path / "r")
    Recorder(tmp_path / "r", overwrite=True).close()


def test_logging_bad_values_names_the_problem(tmp_path):
    rec = Recorder(tmp_path / "r")
    with pytest.raises(ValueError, match="one number"):
        rec.log(train_loss=torch.ones(3))
    with pytest.raises(TypeError, match="must be a number"):
        rec.log(train_loss="low")
    with pytest.raises(ValueError, match="square"):
        rec.confusion(matrix=np.ones((2, 3)))
    rec.close()
    with pytest.raises(RunFileError, match="closed"):
        rec.log(train_loss=1.0)


def test_confusion_recall_precision(tmp_path):
    rec = Recorder(tmp_path / "r")
    t = np.array([0, 0, 1, 1, 1, 2])
    p = np.array([0, 1, 1, 1, 0, 1])
    m = rec.confusion(targets=t, predictions=p, num_classes=3, classes=["a", "b", "c"])
    rec.close()
    np.testing.assert_array_equal(m, [[1, 1, 0], [1, 2, 0], [0, 1, 0]])
    _, recall, precision, names = load_run(tmp_path / "r").recall_precision("val/confusion")
    np.testing.assert_allclose(recall[0], [0.5, 2 / 3, 0.0])
    np.testing.assert_allclose(precision[0][:2], [0.5, 0.5])
    assert math.isnan(precision[0][2]) and names == ["a", "b", "c"]


def test_run_json_round_trip_equals_the_log(tmp_path):
    _, rec, w, _, (x, _) = _train(tmp_path, steps=6, activations=["1"])
    w.capture(x[:2], ["1"], example_name="x[0:2]")
    path = rec.close()
    from caliper_vk.record.run import run_from_log

    a, b = run_from_log(tmp_path / "run" / "log.jsonl"), load_run(path)
    assert a.metrics.keys() == b.metrics.keys()
    for k in a.metrics:
        np.testing.assert_array_equal(a.metrics[k].step, b.metrics[k].step)
        np.testing.assert_array_equal(a.metrics[k].value, b.metrics[k].value)
    f = b.arrays["features/1"][0]
    assert (f.module, f.example, f.array.shape) == ("1", "x[0:2]", (2, 12))
    doc = json.loads(path.read_text())
    assert doc["schema"] == "caliper-run/3" and doc["status"] == "complete"
    sidecars = list(path.parent.glob("run-*.bin"))
    assert [p.name for p in sidecars] == [doc["data"]["file"]]  # one, named by the document
    assert not b.metrics["train/loss"].value.flags.owndata  # a view of the memory-mapped sidecar
    assert '"b64"' not in path.read_text()  # no array text in the document


def test_log_lines_are_checksummed(tmp_path):
    rec = Recorder(tmp_path / "r")
    rec.log(train_loss=1.0)
    rec.log(train_loss=2.0)
    rec.close()
    raw = rec.log_path.read_bytes().split(b"\n")
    raw[1] = raw[1].replace(b"1.0", b"9.0")
    rec.log_path.write_bytes(b"\n".join(raw))
    contents = read_log(rec.log_path)
    assert any("checksum mismatch" in p for p in contents.problems)
    run = load_run(rec.log_path)
    assert run.metrics["train/loss"].value.tolist() == [2.0]
