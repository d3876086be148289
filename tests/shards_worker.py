"""One rank of tests/test_watch_sharded.py: ``watch`` on a model sharded across 2 ranks
(gloo, CPU) with FSDP2's ``fully_shard`` or FSDP1's ``FullyShardedDataParallel``
(``use_orig_params=True``), recording on rank 0 (``recorder=None`` on rank 1).

``python -m torch.distributed.run --nproc_per_node 2 shards_worker.py {fsdp2|fsdp1}[:options] OUT``
with options separated by commas: ``thinned`` (rank 1's budget takes update ratios every 2
steps, rank 0's every step), ``closure`` (each step is ``opt.step(closure)``: forward, backward
and clipping inside the step, as Lightning runs it), ``capture`` (after training, ``capture``
on every rank, then on rank 0 alone, which must raise; both written to ``OUT/capture.json``).
Each step, every rank also gathers the whole parameters and gradients (``full_tensor()`` /
``summon_full_params``) and rank 0 writes their norms, computed on the full tensors, to
``OUT/reference.json``: what the recorded norms must equal.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

import caliper_vk as cv
from caliper_vk.record import histogram_counts

STEPS = 4
BINS, RANGE = 12, (-1.0, 1.0)


def model():
    torch.manual_seed(0)  # the same weights on every rank before sharding
    # 2.weight has 5 rows: 3 + 2 on two ranks; 4.bias has 1 element: rank 1's shard is empty
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5), torch.nn.Tanh(),
                               torch.nn.Linear(5, 1))


def shard(net, how: str):
    if how == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for i in (0, 2, 4):
            fully_shard(net[i])
        fully_shard(net)

        def full():
            return {n: (p.full_tensor(), None if p.grad is None else p.grad.full_tensor())
                    for n, p in net.named_parameters()}
        return net, full
    from torch.distributed.fsdp import FullyShardedDataParallel

    net[2] = FullyShardedDataParallel(net[2], use_orig_params=True, device_id=torch.device("cpu"))
    wrapped = FullyShardedDataParallel(net, use_orig_params=True, device_id=torch.device("cpu"))

    def full():
        with FullyShardedDataParallel.summon_full_params(wrapped, with_grads=True):
            return {n.replace("_fsdp_wrapped_module.", ""): (p.detach().clone(),
                    None if p.grad is None else p.grad.detach().clone()) for n, p in wrapped.named_parameters()}
    return wrapped, full


def main(how: str, out: Path) -> None:
    how, _, options = how.partition(":")
    options = set(options.split(","))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    net, full = shard(model(), how)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    rec = cv.Recorder(out / "run") if rank == 0 else None
    w = cv.watch(net, opt, rec, budget=None, histograms_every=2, histogram_bins=BINS, histogram_range=RANGE)
    if "thinned" in options and rank == 1:
        w.budget.every = 2  # as a budget thinning this rank's expensive records would
    g = torch.Generator().manual_seed(1 + rank)  # each rank its own batch
    reference = {"grad": [], "weight": [], "update": [], "hist": {}}
    before = {n: p for n, (p, _) in full().items()}
    for step in range(1, STEPS + 1):
        x, y = torch.randn(6, 8, generator=g), torch.randn(6, 1, generator=g)
        grads = {}

        def closure(x=x, y=y, grads=grads):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()
            grads.update({n: gr for n, (_, gr) in full().items()})
            w.clip_grad_norm_(100.0)  # (a cap the norm never reaches: recorded, nothing clipped)
            return loss

        if "closure" in options:
            loss = opt.step(closure)
        else:
            loss = closure()
            opt.step()
        after = {n: p for n, (p, _) in full().items()}
        reference["grad"].append({n: float(torch.linalg.vector_norm(v)) for n, v in grads.items()})
        reference["weight"].append({n: float(torch.linalg.vector_norm(v)) for n, v in after.items()})
        reference["update"].append({n: float(torch.linalg.vector_norm(after[n] - before[n]))
                                    for n in after})
        if step % 2 == 0:
            reference["hist"][step] = {n: histogram_counts(v, BINS, *RANGE)["counts"].tolist()
                                       for n, v in after.items()}
        before = after
        if rec is not None:
            rec.log(train_loss=loss)
    if "capture" in options:
        x = torch.randn(3, 8, generator=torch.Generator().manual_seed(5))
        both = w.capture(x, ["2"], name="features")
        w.capture(x, ["2"], name="features")  # a second call on every rank deletes the first's key
        from torch.distributed import distributed_c10d

        store = distributed_c10d._get_default_store()
        first, second = (w.shards.together_key("watch.capture()", n) for n in (1, 2))
        dist.barrier()
        kept = {"first": store.check([first]), "second": store.check([second])}
        alone = ""
        if rank == 0:  # rank 1 does not call it: rank 0 must say so instead of hanging in the gather
            try:
                w.capture(x, ["2"], name="features", wait_s=1.0)
            except RuntimeError as e:
                alone = str(e)
            got = {"both": list(both["2"].shape), "alone": alone, "kept": kept}
            (out / "capture.json").write_text(json.dumps(got))
    w.remove()
    if rec is not None:
        rec.close()
        reference["hist"][0] = {n: histogram_counts(v, BINS, *RANGE)["counts"].tolist()
                                for n, v in model().named_parameters()}
        (out / "reference.json").write_text(json.dumps(reference))
    assert np.isfinite(float(loss))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(sys.argv[1], Path(sys.argv[2]))
