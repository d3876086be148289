"""A torch.distributed job seen from one window: every rank's probes gathered to rank 0.

The 2-process job is started by ``torchrun``. The 3-process job, in which rank 2 is
killed mid-run, is started as torchrun starts its workers (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) but without its agent: torchrun stops every worker as soon as
one fails, which is exactly what the test must show does not happen to the others.
Each run costs ~20 s here (three Python processes importing torch on a shared 2-core box).
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from caliper_vk.record import load_run
from caliper_vk.views import Heatmap, PointCloud
from images import assert_same_image

HERE = Path(__file__).resolve().parent
WORKER = HERE / "distributed_worker.py"
sys.path.insert(0, str(HERE))
import distributed_worker as worker  # noqa: E402

pytest.importorskip("torch.distributed")


def env() -> dict:
    e = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE.parent))
    e.pop("DISPLAY", None)
    return e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def twin(view, rect) -> np.ndarray:
    return view.reference(rect[2], rect[3])


def check_frames(out: Path, world: int, steps, artifacts: Path) -> dict:
    """Rank 0's frame of each step equals the twins of the concatenated tensors, byte for byte."""
    result = json.loads((out / "rank0.json").read_text())
    for step in steps:
        shown = {int(r): s for r, s in result["shown"][str(step)].items()}
        assert shown == dict.fromkeys(range(world), step), shown  # lockstep: every rank's step k
        frame = np.load(out / f"frame_{step}.npy")
        cloud = np.concatenate([worker.cloud(r, step) for r in range(world)])
        heat = np.concatenate([worker.heat(r, step) for r in range(world)], axis=1)  # side by side
        views = {"cloud": PointCloud(cloud, labels=np.repeat(np.arange(world), worker.N)),
                 "attn": Heatmap(heat)}
        for name, view in views.items():
            x, y, w, h = result["panels"][name]
            assert_same_image(frame[y:y + h, x:x + w], twin(view, (x, y, w, h)), artifacts / f"{name}-{step}")
    return result


def torchrun_two(tmp_path, steps=4, lockstep="lockstep", **extra_env):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(WORKER), str(tmp_path), str(steps), "-1", "-1", lockstep]
    return subprocess.run(cmd, env=dict(env(), **extra_env), cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def test_distributed_two_ranks_under_torchrun_draw_the_concatenated_twin(tmp_path, artifacts):
    """Steps 1-4 in lockstep are drawn exactly; at step 5 rank 1 hangs for 4 s: the renderer waits
    2 s (timeout_s), says so and draws on without it, and takes it back when it sends again."""
    done = torchrun_two(tmp_path, steps=7, lockstep="lockstep<5", CALIPER_TEST_STALL="1:5:4",
                        CALIPER_TEST_TIMEOUT="2")
    assert done.returncode == 0, done.stderr[-3000:]
    result = check_frames(tmp_path, 2, range(1, 5), artifacts)
    assert result["notes_by_step"]["5"] == "rank 1 stopped"
    assert "rank 1 stopped after step 4 (nothing for 2 s)" in result["messages"]["5"]
    assert not any(result["stopped"].values())  # it sent again
    assert result["notes"] == ["colour: rank", "ranks 0–1 side by side"]
    run = load_run(tmp_path / "run")
    for r in range(2):  # each rank's throughput and memory, recorded on the rendering rank
        assert len(run.metrics[f"throughput/rank{r}_steps_per_s"]) >= 3
        assert run.metrics[f"memory/rank{r}_rss_bytes"].measured()[1].min() > 1e7


def test_distributed_three_ranks_one_killed_the_others_train_on(tmp_path, artifacts):
    port, steps, kill = free_port(), 12, 5
    procs = []
    for rank in range(3):
        e = dict(env(), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(tmp_path), str(steps), "2", str(kill),
                                       f"lockstep<{kill}"], env=e, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=150) for p in procs]
    assert procs[2].returncode == -9  # killed mid-run
    for p, (_, err) in zip(procs[:2], outs[:2], strict=True):
        assert p.returncode == 0, err[-3000:]
    assert json.loads((tmp_path / "rank1.json").read_text())["steps"] == steps  # it trained to the end
    result = check_frames(tmp_path, 3, range(1, kill), artifacts)
    assert result["steps"] == steps
    assert result["stopped"]["2"].startswith(f"rank 2 stopped after step {kill - 1}")
    assert result["notes"] == ["rank 2 stopped"] * 2  # every panel says so
    assert f"rank 2 stopped after step {kill - 1} (" in result["status"]  # with gloo's reason
    run = load_run(tmp_path / "run")  # the record is intact, every step of the surviving ranks in it
    steps_of = {r: run.metrics[f"throughput/rank{r}_steps_per_s"].measured()[0] for r in range(3)}
    assert steps_of[0][-1] == steps and steps_of[1][-1] == steps and steps_of[2][-1] == kill - 1


def test_distributed_collective_payload_moves_on_the_training_thread_for_drawn_steps_only(
        tmp_path, artifacts):
    """payload="collective" (NCCL's mode; here on gloo): the draw decision is broadcast from
    rank 0 at every step and the payloads move in one batch_isend_irecv on every rank's
    training thread, only for the steps rank 0 draws (step 3: its session is paused); the
    frames are the twins of the concatenated tensors."""
    done = torchrun_two(tmp_path, steps=5, CALIPER_TEST_PAYLOAD="collective", CALIPER_TEST_PAUSE="3")
    assert done.returncode == 0, done.stderr[-3000:]
    result = check_frames(tmp_path, 2, [1, 2, 4, 5], artifacts)
    assert "3" not in result["shown"]  # not drawn
    sender = json.loads((tmp_path / "rank1.json").read_text())
    assert result["exchanged"] == sender["exchanged"] == 4  # sent for the 4 drawn steps, not step 3


def test_a_clean_destroy_process_group_is_not_a_stopped_rank(tmp_path):
    """Every rank ends with dist.destroy_process_group() and no close(): rank 1's last message
    still goes out (the group is closed after it), so rank 0 never reports it stopped."""
    done = torchrun_two(tmp_path, steps=3, CALIPER_TEST_DESTROY="1", CALIPER_TEST_TIMEOUT="5")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "rank0.json").read_text())
    assert not any(result["stopped"].values()), result["stopped"]
    assert "stopped" not in result["messages"]["end"] and "stopped" not in result["status"], result
