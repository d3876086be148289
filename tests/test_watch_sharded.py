"""``watch`` on a sharded model (2 ranks under torchrun, gloo, CPU): FSDP2's ``fully_shard``
(DTensor parameters, one uneven and one empty shard) and FSDP1 with ``use_orig_params``. The
recorded gradient and weight norms, update ratios and weight histograms are the whole
parameters', equal to the ones computed on the full tensors gathered on rank 0 (float
tolerance: the sum of two shards' squares is not the full tensor's sum in the same order; the
histograms' counts exactly). Each job costs ~30 s here (two processes importing torch)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from caliper_vk.record import load_run

HERE = Path(__file__).resolve().parent
dist = pytest.importorskip("torch.distributed")


def torchrun(tmp_path, how: str):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this build")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE.parent))
    env.pop("DISPLAY", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(HERE / "shards_worker.py"), how, str(tmp_path)]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return load_run(tmp_path / "run"), json.loads((tmp_path / "reference.json").read_text())


def check(run, ref, ratio_steps=(1, 2, 3, 4)) -> None:
    names = sorted(ref["weight"][0])
    assert names == ["0.bias", "0.weight", "2.bias", "2.weight", "4.bias", "4.weight"]
    steps = len(ref["weight"])
    for kind, metric in (("grad", "grad_norm"), ("weight", "weight_norm")):
        for n in names:
            series = run.metrics[f"{metric}/{n}"]
            assert list(series.step) == list(range(1, steps + 1))
            np.testing.assert_allclose(series.value, [r[n] for r in ref[kind]], rtol=1e-5, atol=1e-7)
        whole = [np.sqrt(sum(v * v for v in r.values())) for r in ref[kind]]
        np.testing.assert_allclose(run.metrics[f"{metric}/global"].value, whole, rtol=1e-5)
        if kind == "grad":  # FSDP1's own clip_grad_norm_, or DTensor gradients' whole norm
            np.testing.assert_allclose(run.metrics["grad_norm/global_preclip"].value, whole, rtol=1e-5)
            assert list(run.metrics["clip/hit"].value) == [0.0] * steps
    for n in names:  # Adam's update from its (sharded) state against the full weights' difference
        ratio = [r[n] / w[n] for r, w in zip(ref["update"], ref["weight"], strict=True)]
        series = run.metrics[f"update_ratio/{n}"]
        assert list(series.step) == list(ratio_steps)
        np.testing.assert_allclose(series.value, [ratio[s - 1] for s in ratio_steps], rtol=1e-4)
    for n in names:
        frames = run.histograms[f"weights/{n}"]
        assert [f.step for f in frames] == [0, 2, 4]
        for f in frames:
            assert f.counts.tolist() == ref["hist"][str(f.step)][n]
    # the negative control: one rank's shard is not the whole parameter
    assert run.metrics["weight_norm/4.bias"].value[0] > 0


def test_watch_on_fully_shard_records_the_whole_parameters_norms(tmp_path):
    run, ref = torchrun(tmp_path, "fsdp2")
    check(run, ref)


def test_watch_on_fsdp1_use_orig_params_records_the_whole_parameters_norms(tmp_path):
    run, ref = torchrun(tmp_path, "fsdp1")
    check(run, ref)


def test_update_ratios_are_recorded_at_the_steps_every_rank_measured(tmp_path):
    """Each rank's budget thins its own expensive records; the reduction keeps one layout and counts
    the ranks that measured, so a step one rank skipped is left out instead of recorded from half
    the shards (and no collective is mismatched)."""
    run, ref = torchrun(tmp_path, "fsdp2:thinned")
    check(run, ref, ratio_steps=(2, 4))


@pytest.mark.parametrize("how", ["fsdp2", "fsdp1"])
def test_a_sharded_step_with_a_closure_and_capture_on_every_rank(tmp_path, how):
    """Each step is ``opt.step(closure)`` (forward, backward, clipping inside the step, as
    Lightning runs it): the norms are still of the gradients each step uses, step 1 included.
    Then ``capture`` on both ranks records the probe (its forward gathers the shards), and
    rank 0 calling it alone raises with the fix instead of hanging in the gather."""
    run, ref = torchrun(tmp_path, f"{how}:closure,capture")
    check(run, ref)
    got = json.loads((tmp_path / "capture.json").read_text())
    assert got["both"] == [3, 5]
    assert "must be called on every rank" in got["alone"] and "1 of the 2 ranks" in got["alone"]
    # the rendezvous store keeps the latest call's count only, not one key per call
    assert got["kept"] == {"first": False, "second": True}
    assert [f.array.shape for f in run.arrays["features/2"]] == [(3, 5)] * 2
