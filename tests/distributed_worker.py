"""One rank of the distributed tests (tests/test_distributed.py): trains a small model on its
own data (no collectives: a rank that is killed must not stop the others' training), writes
probes each step and draws on rank 0. Started by torchrun, or by the test with the same
environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""

import datetime
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

import caliper_vk
from caliper_vk.live import Session, distributed

N, H, W = 200, 6, 10
SIZE = (480, 200)


def cloud(rank: int, step: int) -> np.ndarray:
    return (np.random.default_rng(1000 * rank + step).normal(size=(N, 3)) + 3 * rank).astype(np.float32)


def heat(rank: int, step: int) -> np.ndarray:
    return np.random.default_rng(7000 + 1000 * rank + step).normal(size=(H, W)).astype(np.float32)


def main(out: Path, steps: int, kill_rank: int, kill_step: int, lockstep_until: int) -> None:
    rank = int(os.environ["RANK"])
    backend = os.environ.get("CALIPER_TEST_BACKEND", "gloo")  # "nccl": one GPU per rank
    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = f"cuda:{rank}"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
    session = Session(window=False, size=SIZE, history=None, budget=None) if rank == 0 else None
    recorder = caliper_vk.Recorder(out / "run") if rank == 0 else None
    # CALIPER_TEST_STALL="rank:step:seconds": that rank sleeps before that step's send (a hung rank)
    stall = [float(v) for v in os.environ.get("CALIPER_TEST_STALL", "-1:-1:0").split(":")]
    timeout = float(os.environ.get("CALIPER_TEST_TIMEOUT", "20"))
    payload = os.environ.get("CALIPER_TEST_PAYLOAD", "auto")  # "collective": on the training thread
    g = distributed.gather(session=session, recorder=recorder, timeout_s=timeout, payload=payload)
    pts, att = torch.zeros(N, 3, device=device), torch.zeros(H, W, device=device)
    caliper_vk.attach(pts, "pointcloud", name="cloud")
    caliper_vk.attach(att, "heatmap", name="attn", ranks="side")
    torch.manual_seed(rank)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    shown, notes, messages = {}, {}, {}
    for step in range(1, steps + 1):
        x = torch.randn(32, 8)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        # CALIPER_TEST_PAUSE=k: rank 0's session is paused at step k (no frame: not due)
        paused = step == int(os.environ.get("CALIPER_TEST_PAUSE", "-1"))
        if rank == 0:
            session.paused = paused
        # senders always, in thread mode; rank 0 too (it waits for each frame), unless paused
        assert caliper_vk.due(step) or (paused and rank == 0)
        pts.copy_(torch.from_numpy(cloud(rank, step)))
        att.copy_(torch.from_numpy(heat(rank, step)))
        if rank == kill_rank and step == kill_step:
            # an abrupt death: SIGKILL where it exists; Windows has none (SIGTERM is TerminateProcess there)
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
        if rank == stall[0] and step == stall[1]:
            time.sleep(stall[2])
        if caliper_vk.step(step) and rank == 0:
            frame = session.flush()
            np.save(out / f"frame_{step}.npy", frame)
            shown[step] = {r: s.step for r, s in g.ranks.items()}
            notes[step] = session.panels[0].note
            messages[step] = session.message
        if step < lockstep_until:  # the exactness tests: rank r's message of step k is the one drawn at step k
            dist.barrier()
    if stall[0] >= 0:  # after a stall, every rank is here: rank 0 draws on until it hears again
        dist.barrier()
        for extra in range(1, 100):
            if rank != 0 or not any(s.stopped for s in g.ranks.values()):
                break
            time.sleep(0.05)
            caliper_vk.step(steps + extra)
            session.flush()
        notes["end"] = session.panels[0].note if rank == 0 else ""
    if os.environ.get("CALIPER_TEST_DESTROY"):  # a clean end of job: the group is destroyed, no close()
        dist.barrier()
        if rank == 0:
            for extra in range(1, 11):  # rank 0 draws on while rank 1 leaves
                time.sleep(0.05)
                caliper_vk.step(steps + extra)
                session.flush()
            messages["end"] = session.message
        dist.destroy_process_group()
    else:
        g.close()
    result = {"rank": rank, "steps": step, "loss": loss.item(), "exchanged": g.exchanged}
    if rank == 0:
        panels = {p.name: [p.view.rect.x, p.view.rect.y, p.view.rect.width, p.view.rect.height]
                  for p in session.panels}
        result.update(shown=shown, panels=panels, notes=[p.note for p in session.panels], notes_by_step=notes,
                      messages=messages,
                      stopped={r: s.stopped for r, s in g.ranks.items()}, status=session.status().line())
        recorder.close()
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # threads may still block on a dead peer's socket: leave without joining them


if __name__ == "__main__":
    # "lockstep": a barrier after every step; "lockstep<K": before step K only (a rank dies at K)
    mode = sys.argv[5]
    until = int(mode.partition("<")[2]) if "<" in mode else (10**9 if mode == "lockstep" else 0)
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), until)
