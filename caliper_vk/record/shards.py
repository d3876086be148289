"""Norms of parameters split across ranks: FSDP2's DTensors, FSDP1's sharded parameters.

Under sharded data parallelism each rank holds a piece of every parameter (and of
its gradient and optimizer state): ``torch._foreach_norm`` of ``p.grad`` is the norm
of this rank's shard. The whole parameter's L2 norm is the square root of the sum,
over the ranks it is split across, of the shards' squared norms. So ``watch`` on a
sharded model computes each shard's squared norms on the device as usual, and adds
them up across ranks with one ``all_reduce`` (SUM) per step, started without waiting
(``async_op``): on CUDA (NCCL) the copy to host is queued behind it on the stream, on
a CPU (gloo) the staged values are written once the reduction has completed. The
training step never waits for it; the square roots are taken on the host when the
values arrive (:class:`~caliper_vk.record.stage.Staging`).

What it takes: every rank calls ``watch`` (a rank that records nothing passes
``recorder=None``), and the reduction has a fixed layout so that it is the same
collective on every rank whatever each rank measured: a slot per watched parameter
for the gradient, the weight and the update, flags of which ranks had a gradient or
an update, and a count of the ranks that took the expensive step (a rank's budget
may thin its update ratios differently: an update ratio is recorded only for steps
every rank measured). A parameter that is not sharded (a full copy on every rank) is
counted once, by the group's first rank.

Which parameters are sharded, over which ranks (:func:`sharding`): a DTensor's
``Shard`` placements on its device mesh (one mesh dimension: FSDP2, HSDP's shard
dimension; every dimension of a mesh that spans the job: the whole job), and the
parameters of FSDP1 units (``FullyShardedDataParallel``, any sharding strategy but
``NO_SHARD``, over the units' process group). Parameters sharded over different groups
of ranks (2-D parallelism over one mesh dimension each) have no single reduction: the
norms are then per shard, and the metrics' descriptions and stderr say so.
"""

from __future__ import annotations

import time
from collections import deque

TOGETHER_WAIT_S = 60.0  # how long a rank waits for the others at a call every rank must make


def local(t):
    """A DTensor's shard on this rank (``to_local()``); any other tensor as it is."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def _fsdp1_units(model) -> list:
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # a torch built without distributed
        return []
    return [m for m in model.modules() if isinstance(m, FullyShardedDataParallel)]


def _dtensor_group(p):
    """``(group, why)``: the group ``p`` is sharded over (None: not sharded), or why no one group."""
    import torch.distributed as dist

    mesh, placements = p.device_mesh, p.placements
    dims = [d for d, pl in enumerate(placements) if pl.is_shard()]
    if not dims:
        return None, None
    if len(dims) == 1:
        return mesh.get_group(dims[0]), None
    if len(dims) == mesh.ndim and mesh.size() == dist.get_world_size():
        return dist.group.WORLD, None
    return None, f"sharded over mesh dimensions {dims} of a {mesh.ndim}-D mesh that is not the whole job"


def _ranks(group) -> tuple:
    import torch.distributed as dist

    return tuple(dist.get_process_group_ranks(group))


class Sharding:
    """How the watched parameters are split across ranks, and the reduction that sums their
    shards' squared norms.

    ``group``: the ranks to reduce over (None: no single group, and ``note`` says why the norms
    are per shard); ``sharded``: per watched parameter, whether it is split over ``group``."""

    def __init__(self, group, sharded: list[bool], note: str | None = None):
        import torch.distributed as dist

        self.group, self.sharded, self.note = group, list(sharded), note
        self.size = dist.get_world_size(group) if group is not None else 1
        self.first = group is None or dist.get_rank(group) == 0
        self._flags: dict = {}
        self._calls: dict[str, int] = {}

    def flags(self, bits, device, dtype=None):
        """``bits`` (a sequence of 0/1) as a device vector, made once per pattern (a steady loop has
        one or two) so that no step copies from the host."""
        import torch

        key = (tuple(int(b) for b in bits), device, dtype)
        got = self._flags.get(key)
        if got is None:
            if len(self._flags) > 64:
                self._flags.clear()
            got = self._flags[key] = torch.tensor(key[0], dtype=dtype or torch.float32).to(device)
        return got

    def mask(self, device, dtype=None):
        """Per watched parameter: 1 where it is sharded, and where it is not (a full copy on every
        rank), 1 on the group's first rank and 0 on the others: a sum over ranks counts it once."""
        return self.flags([s or self.first for s in self.sharded], device, dtype)

    def reduce(self, vector) -> tuple:
        """Sum ``vector`` over the group in place, without waiting. Returns the works the values
        must wait for before they are read: none on CUDA (the stream waits, not the host), the
        reduction's on a CPU."""
        import torch.distributed as dist

        work = dist.all_reduce(vector, op=dist.ReduceOp.SUM, group=self.group, async_op=True)
        if vector.device.type == "cuda":
            work.wait()  # NCCL: the current stream waits for the reduction; the host does not
            return ()
        return (work,)

    def together(self, what: str, wait_s: float = TOGETHER_WAIT_S) -> None:
        """Before a call that runs collectives (a forward of a sharded model all-gathers its
        parameters): wait until every rank of the group (of the job, when the parameters have no
        single group) has reached its ``n``-th call of ``what`` too, or raise after ``wait_s``
        seconds naming the call and the fix, instead of hanging in the collective. It costs a few
        round trips to the job's rendezvous store (no collective, no device work)."""
        import torch.distributed as dist
        from torch.distributed import distributed_c10d

        ranks = self._together_ranks()
        n = self._calls[what] = self._calls.get(what, 0) + 1
        key = self.together_key(what, n)
        store = distributed_c10d._get_default_store()
        got = store.add(key, 1)
        deadline = time.monotonic() + wait_s
        while got < len(ranks):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what} on a sharded model must be called on every rank (its forward gathers the "
                    f"parameters from all of them): rank {dist.get_rank()} waited {wait_s:g} s at call {n} "
                    f"and {got} of the {len(ranks)} ranks {list(ranks)} arrived. Call it on every rank "
                    "(the ranks that record nothing too: their watch has recorder=None, and their capture "
                    "records nothing)")
            time.sleep(0.005)
            got = store.add(key, 0)
        # Every rank has reached call n, so none still reads call n - 1's count: the group's first
        # rank deletes it (the store keeps one key per kind of call, not one per call).
        if n > 1 and dist.get_rank() == ranks[0]:
            store.delete_key(self.together_key(what, n - 1))

    def _together_ranks(self) -> tuple:
        import torch.distributed as dist

        return _ranks(self.group) if self.group is not None else tuple(range(dist.get_world_size()))

    def together_key(self, what: str, n: int) -> str:
        """The rendezvous store's key that counts the ranks arrived at the ``n``-th call of ``what``."""
        return f"caliper_vk/{what}/{'-'.join(map(str, self._together_ranks()))}/{n}"


def sharding(model, params) -> Sharding | None:
    """The :class:`Sharding` of ``params`` (the watched parameters, in order) of ``model`` (as
    ``watch`` was given it: an FSDP1 root is looked at before it is unwrapped), or None when no
    parameter is sharded (or torch.distributed is not initialised)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    groups, notes = [], []
    for p in params:
        if hasattr(p, "device_mesh") and hasattr(p, "placements"):
            g, why = _dtensor_group(p)
            groups.append(g)
            if why:
                notes.append(why)
        else:
            groups.append(None)
    units = _fsdp1_units(model)
    if units:
        owned = {}
        for unit in units:
            if str(getattr(unit, "sharding_strategy", "")).endswith("NO_SHARD"):
                continue
            for q in unit.parameters():
                owned.setdefault(id(q), unit.process_group)
        groups = [g if g is not None else owned.get(id(p)) for p, g in zip(params, groups, strict=True)]
    found = {_ranks(g): g for g in groups if g is not None}
    if not found and not notes:
        return None
    sharded = [g is not None for g in groups]
    if len(found) > 1:
        notes.append("parameters are sharded over different groups of ranks ("
                     + "; ".join(f"ranks {list(r)}" for r in found) + ")")
    if notes:
        return Sharding(None, sharded, note="; ".join(dict.fromkeys(notes)))  # (each reason once)
    return Sharding(next(iter(found.values())), sharded)


class Unrecorded:
    """The recorder of a rank that records nothing (``watch(..., recorder=None)`` on the ranks
    other than the one that writes the run): it counts steps, keeps each staged tensor alive
    until its reduction has completed, and writes nothing. ``watch`` still measures on such a
    rank, because its shards' norms are part of every rank's sums."""

    path = None
    closed = False

    def __init__(self):
        self._step = 0
        self._in_flight: deque = deque()

    @property
    def step(self) -> int:
        return self._step

    def advance(self, steps: int = 1, examples: int | None = None) -> int:
        del examples
        self._step += int(steps)
        return self._step

    def stage(self, tensor, write, works=()) -> None:
        del write
        if works:
            self._in_flight.append((tensor, works))
        self.poll()

    def poll(self) -> None:
        while self._in_flight and all(w.is_completed() for w in self._in_flight[0][1]):
            self._in_flight.popleft()

    def flush(self) -> None:
        while self._in_flight:
            for w in self._in_flight.popleft()[1]:
                w.wait()

    def define(self, *args, **kwargs) -> None:
        del args, kwargs

    def log(self, *args, **kwargs) -> None:
        del args, kwargs

    def histograms(self, *args, **kwargs) -> dict:
        del args, kwargs
        return {}

    def probe(self, *args, **kwargs) -> None:
        del args, kwargs
