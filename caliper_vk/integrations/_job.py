"""A callback in a torch.distributed job: one rendering rank, one run, one decision for all.

Under ``torchrun`` (or a framework's own multi-process strategy) the callback runs
on every rank. What it does there:

- **one session, one run**: only the rendering rank (rank 0) opens a session and,
  with ``run_dir``, the ``Recorder`` and ``watch``; the other ranks never touch
  Vulkan or the run directory.
- **drawing through the project's gather**: every rank's probe arrays go to the
  rendering rank through :class:`caliper_vk.live.distributed.Gather` (rows one rank
  after the other, a point cloud coloured by rank), which also records each rank's
  throughput and memory into the run.
- **one decision**: whether a step runs the probe forward is decided by the rendering
  rank's ``session.due()`` (and the deterministic ``record_every`` schedule) and
  shared by an ``all_reduce`` (MAX) of two numbers on a gloo group of its own, every
  optimizer step: so the probe forward runs on every rank together or on none (under
  FSDP or ZeRO-3 it all-gathers parameters: a forward on some ranks only would hang
  the job). A rank that can no longer probe (no example, a failed forward) says so
  in the same message, and then no rank probes.
- **one layout**: the probes gathered are fixed at the first probe, the ones every
  rank produced with the same shape (``all_gather_object`` once); one that differs
  is named on the rendering rank's status line and left out.
"""

from __future__ import annotations


def in_job() -> bool:
    from ..live.distributed import in_job as live_in_job

    return live_in_job()


class Job:
    """The callback's view of the job. Made on every rank at the same point (training starts):
    it creates gloo groups, which is a collective call."""

    def __init__(self, session=None, recorder=None, renderer: int = 0, timeout_s: float = 30.0):
        import torch.distributed as dist

        from ..live.distributed import Gather

        self.dist = dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.renderer = renderer
        self.is_renderer = self.rank == renderer
        self.group = dist.new_group(backend="gloo")  # the decisions: CPU tensors on any backend
        self.gather = Gather(session=session, renderer=renderer, timeout_s=timeout_s, recorder=recorder)
        self.attached = False  # the probes' layout is fixed (at the first probe)
        self.gathering = False  # probes were attached: every step goes through the gather
        self.probes: dict = {}  # name -> the Gather's Probe (its caption is the panel's title note)

    def decide(self, due: bool, stop: bool) -> tuple[bool, bool]:
        """``(due, stop)`` as the whole job sees them: due when the rendering rank's frame is due,
        stop when any rank can no longer probe."""
        import torch

        flags = torch.tensor([float(due and self.is_renderer), float(stop)])
        self.dist.all_reduce(flags, op=self.dist.ReduceOp.MAX, group=self.group)
        return bool(flags[0]), bool(flags[1])

    def agree(self, entries: list[tuple]) -> tuple[list[tuple], dict]:
        """The ``(name, kind, shape)`` entries every rank has, in this rank's order, and
        ``{name: why}`` for the ones left out."""
        everyone: list = [None] * self.world
        self.dist.all_gather_object(everyone, [(n, k, tuple(s)) for n, k, s in entries], group=self.group)
        common = set.intersection(*(set(e) for e in everyone))
        left = {}
        for n, k, s in entries:
            if (n, k, tuple(s)) in common:
                continue
            shapes = {r: next((e[2] for e in ranked if e[0] == n), None) for r, ranked in enumerate(everyone)}
            each = ", ".join(f"rank {r}: {'none' if sh is None else tuple(sh)}" for r, sh in shapes.items())
            left[n] = (f"not gathered: its shape differs across ranks ({each}); give every rank an "
                       "example of the same shape (example=)")
        return [e for e in entries if (e[0], e[1], tuple(e[2])) in common], left

    def attach(self, name: str, title: str, tensor, view: str, note: str, **options):
        """Gather ``tensor`` (this rank's array of probe ``name``) from every rank into a panel
        called ``title``; on the rendering rank returns that panel."""
        got = self.gather.attach(tensor, view=view, name=title, **options)
        probe = self.gather.probes[-1]
        if note:
            probe.caption = f"{probe.caption} · {note}"
        self.probes[name] = probe
        self.gathering = True
        return got

    def note(self, name: str, text: str) -> None:
        """The rendering rank's title note of ``name``'s panel (the gather shows it when no rank
        stopped)."""
        probe = self.probes.get(name)
        if probe is not None and self.is_renderer:
            rank_part = probe.caption.split(" · ")[0]
            probe.caption = f"{rank_part} · {text}" if text else rank_part

    def step(self, step: int) -> bool:
        return self.gather.step(step)

    def close(self) -> None:
        """Every rank: the gather's last message goes out; the rendering rank waits (at most the
        gather's timeout) for every rank's last message, so that no receiver thread is left inside
        ``recv()`` when the process exits (which aborts it: "terminate called without an active
        exception")."""
        import time

        self.gather.close()
        deadline = time.monotonic() + self.gather.timeout_s
        for receiver in self.gather._receivers.values():
            receiver.join(timeout=max(deadline - time.monotonic(), 0.0))
