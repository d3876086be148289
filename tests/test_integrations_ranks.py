"""Both callbacks under ``torchrun --nproc_per_node 2`` (gloo, CPU) with ``run_dir``: the job
finishes on both ranks (no FileExistsError on rank 1, no abort at exit), one run directory is
written by the rendering rank with every rank's figures, the rendering rank draws every rank's
probes through the distributed gather, and the other rank opens no session.
Each job costs ~40 s here (two processes importing torch and the framework on a shared box)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from caliper_vk.record import load_run

HERE = Path(__file__).resolve().parent
WORKER = HERE / "integrations_worker.py"
pytest.importorskip("torch.distributed")


def torchrun(tmp_path, framework: str):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE.parent))
    env.pop("DISPLAY", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(WORKER),
           framework, str(tmp_path)]
    return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def check(tmp_path, probes: set, recorded: dict) -> None:
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    r1 = json.loads((tmp_path / "rank1.json").read_text())
    assert r0["session"] and r0["recorder"] and not r1["session"] and not r1["recorder"]
    assert r0["job"]["world"] == 2 and set(r0["job"]["probes"]) == set(r1["job"]["probes"]) == probes
    gathered = {n for n, note in r0["notes"].items() if note in ("ranks 0–1 stacked", "colour: rank")}
    assert len(gathered) == len(probes)  # every probe panel holds both ranks' arrays
    assert all(r0["panels"][n] == "zero-copy" for n in gathered), r0["panels"]
    assert r0["frames"] >= 1 and sorted(p.name for p in (tmp_path / "run" / "frames").iterdir()) == [
        "frame_000002.png", "frame_000004.png", "frame_000006.png"]
    run = load_run(tmp_path / "run")
    assert list(run.metrics["train/loss"].step) == [1, 2, 3, 4, 5, 6]
    for r in range(2):  # each rank's figures, gathered to the rendering rank's run
        assert len(run.metrics[f"throughput/rank{r}_steps_per_s"]) >= 3
        assert run.metrics[f"memory/rank{r}_rss_bytes"].measured()[1].min() > 1e7
    for name, shape in recorded.items():
        frames = run.arrays[name]
        assert [f.step for f in frames] == [3, 6] and frames[0].array.shape == shape


def test_hf_trainer_under_torchrun_records_one_run_and_draws_every_rank(tmp_path):
    pytest.importorskip("transformers", reason="transformers is in requirements-dev.txt")
    done = torchrun(tmp_path, "hf")
    assert done.returncode == 0, done.stderr[-4000:]
    check(tmp_path, {"attention/layer0", "attention/layer1", "transformer.h.1.mlp", "transformer.wte"},
          {"attention/attention/layer1": (4, 16, 16), "outputs/transformer.h.1.mlp": (16, 32),
           "embedding/transformer.wte": (64, 3)})


def test_hf_trainer_with_fsdp_under_torchrun_records_the_whole_gradient_norm(tmp_path):
    """A sharded model on a CPU: the Hugging Face ``Trainer`` with FSDP1 (``fsdp="full_shard"``,
    ``use_orig_params``). ``watch`` runs on both ranks and its global gradient norm is the whole
    model's: the ``Trainer``'s own (FSDP's ``clip_grad_norm_``), clipped at its ``max_grad_norm``
    of 1 (the ``Trainer`` logs the norm before clipping, ``watch`` the one the optimizer received)."""
    pytest.importorskip("transformers", reason="transformers is in requirements-dev.txt")
    done = torchrun(tmp_path, "hf:fsdp")
    assert done.returncode == 0, done.stderr[-4000:]
    check(tmp_path, {"attention/layer0", "attention/layer1", "transformer.h.1.mlp", "transformer.wte"},
          {"attention/attention/layer1": (4, 16, 16), "outputs/transformer.h.1.mlp": (16, 32),
           "embedding/transformer.wte": (64, 3)})
    run = load_run(tmp_path / "run")
    ours, theirs = run.metrics["grad_norm/global"], run.metrics["train/grad_norm"]
    assert list(ours.step) == list(theirs.step) == [1, 2, 3, 4, 5, 6]
    assert ours.value == pytest.approx(np.minimum(theirs.value, 1.0), rel=1e-4)
    assert "grad_norm/transformer.h.0.attn.c_attn.weight" in run.metrics  # the original names


def test_lightning_ddp_under_torchrun_records_one_run_and_draws_every_rank(tmp_path):
    pytest.importorskip("pytorch_lightning", reason="pytorch-lightning is in requirements-dev.txt")
    done = torchrun(tmp_path, "lightning")
    assert done.returncode == 0, done.stderr[-4000:]
    # the module calls its attention with need_weights=False: the probe asks for the weights itself
    check(tmp_path, {"attn", "embed", "mlp.1"},
          {"attention/attn": (2, 12, 12), "outputs/mlp.1": (12, 32), "embedding/embed": (20, 3)})
    used = json.loads((tmp_path / "rank0.json").read_text())["used_grad_norms"]  # (all-reduced by DDP)
    norms = load_run(tmp_path / "run").metrics["grad_norm/global"]
    assert norms.step.tolist() == [1, 2, 3, 4, 5, 6] and len(used) == 6
    np.testing.assert_allclose(norms.value, used, rtol=1e-5)


def test_lightning_fsdp_under_torchrun_or_the_reason_it_cannot_run_here(tmp_path):
    """A sharded model: Lightning's FSDP strategy. Where Lightning refuses it on a CPU (it does
    in 2.x: "requires a GPU accelerator"), the test says so and skips; DeepSpeed (ZeRO-3) is
    not a dependency of this project."""
    pl = pytest.importorskip("pytorch_lightning", reason="pytorch-lightning is in requirements-dev.txt")
    try:
        pl.Trainer(accelerator="cpu", devices=2, strategy="fsdp", logger=False, enable_progress_bar=False,
                   enable_checkpointing=False, enable_model_summary=False)
    except (ValueError, RuntimeError, ImportError) as exc:
        pytest.skip(f"a sharded case cannot run on this CPU machine: Lightning says {exc}")
    done = torchrun(tmp_path, "lightning:fsdp")
    assert done.returncode == 0, done.stderr[-4000:]
    check(tmp_path, {"attn", "embed", "mlp.1"},
          {"attention/attn": (2, 12, 12), "outputs/mlp.1": (12, 32), "embedding/embed": (20, 3)})


def test_lightning_fully_shard_under_torchrun_records_the_whole_parameters_norms(tmp_path):
    """A sharded model on a CPU: Lightning's ModelParallelStrategy with FSDP2's ``fully_shard`` in
    ``configure_model``. ``watch`` runs on both ranks (rank 1 records nothing) and the recorded
    weight norms are the whole parameters' (the shards' squares summed across ranks), equal to the
    norms of the gathered parameters at the end."""
    pytest.importorskip("pytorch_lightning", reason="pytorch-lightning is in requirements-dev.txt")
    strategies = pytest.importorskip("pytorch_lightning.strategies")
    if not hasattr(strategies, "ModelParallelStrategy"):
        pytest.skip("this Lightning has no ModelParallelStrategy (2.4 and later)")
    done = torchrun(tmp_path, "lightning:modelparallel")
    assert done.returncode == 0, done.stderr[-4000:]
    check(tmp_path, {"attn", "embed", "mlp.1"},
          {"attention/attn": (2, 12, 12), "outputs/mlp.1": (12, 32), "embedding/embed": (20, 3)})
    full = json.loads((tmp_path / "rank0.json").read_text())["full_norms"]
    run = load_run(tmp_path / "run")
    assert len(full) == 9
    for name, norm in full.items():
        series = run.metrics[f"weight_norm/{name}"]
        assert series.step[-1] == 6
        assert series.value[-1] == pytest.approx(norm, rel=1e-5)
    # the gradients each step used (Lightning's on_before_optimizer_step, inside the step's closure),
    # step 1 included: watch measures after the closure, not one step late
    used = json.loads((tmp_path / "rank0.json").read_text())["used_grad_norms"]
    assert len(used) == 6
    assert run.metrics["grad_norm/global"].step.tolist() == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(run.metrics["grad_norm/global"].value, used, rtol=1e-5)
    assert [f.step for f in run.histograms["weights/embed.weight"]] == [0]
