"""Every rank of a torch.distributed job in one window: probes gathered to one rendering rank.

Under ``torch.distributed`` each rank calls ``caliper_vk.attach(tensor, ...)`` and
``caliper_vk.step()`` as a single process would. Only the *rendering rank* (rank 0
unless told otherwise) opens a session (a window or offscreen frames); every
other rank sends its probes there and never draws, never touches Vulkan and
never waits for a frame:

- at each ``step()`` a sending rank packs its probes into one message (a header —
  step, its throughput and memory — then each probe's bytes) and hands it to a
  sender thread, which sends it over the job's processes (:func:`torch.distributed.send`
  on a gloo group of the job's ranks made at the first attach, tag :data:`TAG`).
  If the previous message is still on its way, the newer one replaces it (the
  renderer shows the latest; the count is kept). The training thread copies the
  bytes and returns.
- the rendering rank runs one receiver thread per rank (:func:`torch.distributed.recv`).
  At its own ``step(k)`` it waits — at most ``timeout_s`` — until every rank still
  sending has delivered step ``k`` or later, writes each rank's bytes into its part
  of one combined tensor per probe (``caliper_vk.empty``: the session draws it
  zero-copy) under ``panel.writing()``, and draws. A rank whose connection closed
  (it died) or that sent nothing for ``timeout_s`` is marked stopped: its last data
  stays on screen, every panel's title says which rank stopped and the status line
  after which step and why, and nobody waits for it again (a message from it later
  revives it). The renderer waits only when its session has a frame due.

Why threads and blocking ``send``/``recv``: gloo's ``irecv`` cannot be polled
(``is_completed()`` turns true only inside ``wait()``), and a ``wait(timeout)``
that expires closes the connection for good; so the renderer's own timeouts are
kept on its side (a condition variable), and gloo only ever reports a peer that
is gone ("Connection closed by peer").

Ranks are shown ``"concat"``-enated (rows one rank after the other; a point cloud's
points coloured by rank) or ``"side"`` by side (along the last axis). Every rank must
attach the same probes (names, shapes, dtypes) in the same order, before its first
``step()``.

Payloads on the training thread (``payload="collective"``; the default with NCCL when
every probe is a CUDA tensor): NCCL's rule is that every rank issues its operations on a
communicator in the same order, which threads cannot promise, and a payload sent every
step costs the training for frames never drawn. So in this mode nothing but the headers
(liveness and figures, as above) leaves a thread. At every ``step()`` each rank, on its
training thread, takes part in one small collective: a broadcast, from the renderer on a
gloo group of its own, of whether the renderer's session draws this step (its ``due()``).
Only on such a step do the payloads move, in one ``batch_isend_irecv`` on every rank (the
probes sent as they are, from device memory with NCCL; received into buffers on the
renderer's GPU), then they are copied device-to-device into the combined tensors
(``caliper_vk.empty(device="cuda")``, shared with Vulkan) inside ``panel.writing()``.
Every rank issues the same operations in the same order: the broadcast each step, the
exchange on drawn steps. Being collective, this mode waits for every rank as the
training's own collectives do (a rank that stops stops the job, as in NCCL training). It
needs one GPU per rank for NCCL; the tests run it with gloo on CPU.

Without NCCL (``payload="threads"``), CUDA probes are copied into pinned host buffers.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import weakref

import numpy as np

from .ranklinks import (HEADER_BYTES, MAGIC, TAG, RankState, Receiver, Sender, close_before_destroy,
                        rss_bytes)
from .._log import logger

LAYOUTS = ("concat", "side")


def in_job() -> bool:
    """True inside an initialised torch.distributed job of more than one process."""
    if "torch" not in sys.modules:
        return False
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class Probe:
    """One attached tensor of a distributed job: the local tensor; on the renderer, also the
    combined tensor and its panel."""

    def __init__(self, name: str, tensor, layout: str):
        if layout not in LAYOUTS:
            raise ValueError(f"ranks={layout!r}: give 'concat' (rows one rank after another) or 'side' "
                             "(side by side along the last axis)")
        if not tensor.is_contiguous():
            raise ValueError(f"probe {name!r} is not contiguous; attach t.contiguous() (an explicit copy)")
        self.name, self.tensor = name, tensor
        self.layout = layout if tensor.dim() >= 2 else "concat"
        self.nbytes = tensor.numel() * tensor.element_size()
        self.offset = 0  # in the message payload
        self.combined = None
        self.panel = None
        self.caption = ""  # the renderer's title note: how the ranks are laid out

    def slot(self, rank: int, world: int):
        """``rank``'s part of the combined tensor, as bytes (a uint8 view)."""
        import torch

        raw = self.combined.view(torch.uint8)  # the last axis counts bytes
        if self.layout == "concat":
            return raw.reshape(world, -1)[rank]
        return raw.reshape(*raw.shape[:-1], world, raw.shape[-1] // world)[..., rank, :]

    def write(self, rank: int, world: int, payload) -> None:
        """Put ``rank``'s bytes (a flat uint8 tensor) into its part of the combined tensor."""
        part = self.slot(rank, world)
        part.copy_(payload.reshape(part.shape))


class Gather:
    """Probes of every rank gathered to one rendering rank (see the module docstring).

    Parameters
    ----------
    session : Session, optional
        The rendering rank's session (``caliper_vk.attach`` gives the default one,
        ``caliper_vk.session()``); other ranks make none.
    renderer : int
        The rendering rank.
    timeout_s : float
        How long the renderer waits for a rank's message of the current step before it
        marks that rank stopped and stops waiting for it.
    recorder : Recorder, optional
        On the rendering rank: each rank's throughput (``throughput/rank{r}_steps_per_s``)
        and memory (``memory/rank{r}_rss_bytes``, ``memory/rank{r}_device_bytes``) are
        logged into it at that rank's step.
    group : ProcessGroup, optional
        A gloo group of all the job's ranks (default: one made with ``new_group`` at
        construction — every rank must construct its ``Gather`` at the same point).
    payload : str
        ``"auto"`` (collective with NCCL when every probe is a CUDA tensor, else threads),
        ``"threads"`` (sender and receiver threads, every step, tolerant of a rank that stops)
        or ``"collective"`` (on the training thread, only for drawn steps; see the module
        docstring). Decided at the first step, the same on every rank.
    """

    def __init__(self, session=None, renderer: int = 0, timeout_s: float = 30.0, recorder=None,
                 group=None, payload: str = "auto"):
        import torch.distributed as dist

        if not in_job():
            raise RuntimeError("Gather needs an initialised torch.distributed job of 2 or more processes "
                               "(call torch.distributed.init_process_group first)")
        self.dist = dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if not 0 <= renderer < self.world:
            raise ValueError(f"renderer={renderer} is not a rank of this {self.world}-process job")
        self.renderer, self.timeout_s, self.recorder = renderer, float(timeout_s), recorder
        if payload not in ("auto", "threads", "collective"):
            raise ValueError(f"payload={payload!r}: give 'auto', 'threads' or 'collective'")
        self.group = group if group is not None else dist.new_group(backend="gloo")
        # every rank makes the same groups here, in the same order (new_group is collective)
        self.nccl_group = dist.new_group(backend="nccl") if "nccl" in str(dist.get_backend()) else None
        self.decide_group = dist.new_group(backend="gloo")  # the per-step draw decision only
        self.payload = payload
        self.collective = False  # decided at the first step (_start)
        self._inbox: dict = {}  # the renderer, collective: rank -> receive buffers (one per probe)
        self.exchanged = 0  # collective mode: the steps whose payloads moved (the drawn ones)
        self.is_renderer = self.rank == renderer
        self._session = session
        self.probes: list[Probe] = []
        self.step_count = 0
        self.started = False
        self.closed = False
        self.ranks = {r: RankState(r) for r in range(self.world)}
        self.cond = threading.Condition()
        self._sender: Sender | None = None
        self._receivers: dict[int, Receiver] = {}
        self._times: list[float] = []
        self.waited_s = 0.0  # the renderer's total wait for other ranks' messages
        self.written_s = 0.0  # and its total time writing them into the combined tensors
        self._logged: dict = {}  # rank -> the last step whose figures went to the recorder
        _OPEN.add(self)
        close_before_destroy(dist, _OPEN)

    @property
    def session(self):
        """The rendering rank's session (None on the other ranks)."""
        if self._session is None and self.is_renderer:
            raise RuntimeError("the rendering rank has no session: pass Gather(session=Session(...)), "
                               "or attach through caliper_vk.attach (the default session)")
        return self._session

    def default_session(self, make) -> None:
        """On the rendering rank, use ``make()`` (``caliper_vk.session``) unless a session was given."""
        if self.is_renderer and self._session is None:
            self._session = make()

    # -- attaching ------------------------------------------------------------------------
    def attach(self, tensor, view: str = "pointcloud", name: str | None = None, ranks: str = "concat",
               **options):
        """Gather ``tensor`` from every rank; on the renderer returns the panel of the combined
        tensor, elsewhere the :class:`Probe`. Options go to the view (renderer only)."""
        if self.started:
            raise RuntimeError("attach every probe before the first step() on every rank (the "
                               "message layout is fixed at the first step)")
        probe = Probe(name or f"{view}{len(self.probes)}", tensor, ranks)
        probe.offset = sum(-(-p.nbytes // 8) * 8 for p in self.probes)
        self.probes.append(probe)
        if not self.is_renderer:
            return probe
        from ..exporters import empty

        shape = list(tensor.shape) or [1]
        if probe.layout == "concat":
            shape[0] *= self.world
        else:
            shape[-1] *= self.world
        device = "cuda" if tensor.device.type == "cuda" else "cpu"
        probe.combined = empty(tuple(shape), tensor.dtype, device)
        probe.caption = (f"ranks 0–{self.world - 1} side by side" if probe.layout == "side"
                         else f"ranks 0–{self.world - 1} stacked")
        if view == "pointcloud" and probe.layout == "concat" and "values" not in options:
            n = tensor.shape[0]
            own = options.pop("labels", None)
            options["labels"] = (np.repeat(np.arange(self.world), n) if own is None
                                 else np.tile(np.asarray(own).reshape(-1), self.world))
            if own is None:
                probe.caption = "colour: rank"
        probe.panel = self.session.attach(probe.combined, view=view, name=probe.name, **options)
        return probe.panel

    @property
    def payload_bytes(self) -> int:
        return sum(-(-p.nbytes // 8) * 8 for p in self.probes)

    # -- the step -------------------------------------------------------------------------------
    def step(self, step: int | None = None) -> bool:
        """Send (other ranks) or gather and draw (the renderer). Returns whether a frame was drawn."""
        self.step_count = self.step_count + 1 if step is None else int(step)
        now = time.perf_counter()
        self._times.append(now)
        del self._times[:-20]
        if not self.started:
            self._start()
        due = self._decide() if self.collective else None
        if not self.is_renderer:
            self._sender.offer(self._pack)
            if due:
                self._exchange()
            return False
        if due:
            self._exchange()
        self._gather(due)
        return self.session.step(self.step_count)

    def _decide(self) -> bool:
        """Collective mode, every rank, every step: whether the renderer draws this step (its
        session's ``due()``), broadcast from the renderer on the decision group."""
        import torch

        flag = torch.zeros(1, dtype=torch.int32)
        if self.is_renderer:
            flag[0] = int(bool(self.session.due(self.step_count)))
        self.dist.broadcast(flag, src=self.renderer, group=self.decide_group)
        return bool(flag[0])

    def _exchange(self) -> None:
        """Collective mode, a drawn step, every rank: the probes to the renderer in one
        ``batch_isend_irecv`` (sent from where they live; received into the renderer's buffers
        on the probes' device). With NCCL the waits order the current stream after the
        transfer (no host wait): the training's next write to a probe comes after its send."""
        import torch

        dist, group = self.dist, self.nccl_group if self.nccl_group is not None else self.group
        ops = []
        if self.is_renderer:
            for r in range(self.world):
                if r == self.renderer:
                    continue
                inbox = self._inbox.get(r)
                if inbox is None:
                    inbox = self._inbox[r] = [torch.empty_like(p.tensor) for p in self.probes]
                ops += [dist.P2POp(dist.irecv, b, r, group=group) for b in inbox]
        else:
            ops = [dist.P2POp(dist.isend, p.tensor.detach(), self.renderer, group=group) for p in self.probes]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        self.exchanged += 1

    def due(self, step: int | None = None) -> bool:
        """The renderer: whether its next step draws (``Session.due``); the other ranks send
        every step, so for them it is always True."""
        return self.session.due(step) if self.is_renderer else True

    def _steps_per_s(self) -> float:
        t = self._times
        return (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else 0.0

    def _device_bytes(self) -> float:
        if any(p.tensor.is_cuda for p in self.probes):
            import torch

            return float(torch.cuda.memory_allocated())
        return 0.0

    def _header(self) -> list:
        return [MAGIC, self.step_count, self._layout_code(), self.payload_bytes, self._steps_per_s(),
                rss_bytes(), self._device_bytes(), 0.0]

    def _layout_code(self) -> float:
        import zlib

        text = ";".join(f"{p.name}:{tuple(p.tensor.shape)}:{p.tensor.dtype}:{p.layout}" for p in self.probes)
        return float(zlib.crc32(text.encode()))

    def _pack(self, buf, finished: bool = False) -> None:
        import torch

        header = self._header()
        header[7] = 1.0 if finished else 0.0
        buf[:HEADER_BYTES].view(torch.float64).copy_(torch.tensor(header, dtype=torch.float64))
        if self.collective:
            return  # the header alone: the payload moves on the training thread, drawn steps only
        for p in self.probes:
            start = HEADER_BYTES + p.offset
            buf[start:start + p.nbytes].copy_(p.tensor.detach().reshape(-1).view(torch.uint8))

    def _start(self) -> None:
        self.started = True
        nccl = self.nccl_group is not None and all(p.tensor.is_cuda for p in self.probes)
        self.collective = self.payload == "collective" or (self.payload == "auto" and nccl)
        if self.collective and self.nccl_group is not None and not nccl:
            raise ValueError("payload='collective' on an NCCL job needs every probe on the GPU")
        dist, g = self.dist, self.group
        nbytes = HEADER_BYTES + (0 if self.collective else self.payload_bytes)
        # a CUDA probe's bytes go through pinned host memory (an asynchronous-capable copy)
        pinned = not self.collective and any(p.tensor.is_cuda for p in self.probes)
        if not self.is_renderer:
            def send(buf):
                dist.send(buf, dst=self.renderer, group=g, tag=TAG)

            self._sender = Sender(g, self.renderer, nbytes, send, pinned=pinned)
            self._sender.start()
            return
        for r in range(self.world):
            if r == self.renderer:
                continue

            def recv(buf, src):
                dist.recv(buf, src=src, group=g, tag=TAG)

            self._receivers[r] = Receiver(r, nbytes, recv, self.cond, self.ranks[r], pinned=pinned)
            self._receivers[r].start()

    # -- the renderer ---------------------------------------------------------------------------
    def _gather(self, decided: bool | None = None) -> None:
        """Wait for every rank's message of this step (only when a frame is due: otherwise the
        renderer does not wait at all), write them into the combined tensors, note who stopped.
        Collective mode (``decided`` is the step's broadcast decision): the payloads arrived
        already (:meth:`_exchange`), so no wait; the headers bring the figures."""
        step = self.step_count
        due = self.session.due(step) if decided is None else decided
        me = self.ranks[self.renderer]
        me.step, me.steps_per_s, me.rss_bytes, me.device_bytes = step, self._steps_per_s(), rss_bytes(), \
            self._device_bytes()
        t0 = time.perf_counter()
        with self.cond:
            def ready():
                return all(rcv.error or self.ranks[r].stopped or self.ranks[r].finished
                           or self.ranks[r].step >= step for r, rcv in self._receivers.items())
            if due and not self.collective:
                self.cond.wait_for(ready, timeout=self.timeout_s)
            messages, newly, now = {}, [], time.monotonic()
            for r, rcv in self._receivers.items():
                s = self.ranks[r]
                if due and self.collective:
                    s.step = max(s.step, step)  # its payload of this step is in the inbox
                if due and rcv.latest is not None:
                    messages[r] = rcv.take()
                    s.stopped = ""  # it sends (again)
                if s.stopped or s.finished:
                    continue  # a finished rank's connection closing is no news
                if rcv.error:
                    s.stopped = f"rank {r} stopped after step {s.step} ({rcv.error})"
                elif (due and s.step < step) or (s.seen and now - s.seen > self.timeout_s):
                    s.stopped = f"rank {r} stopped after step {s.step} (nothing for {self.timeout_s:g} s)"
                if s.stopped:
                    newly.append(s.stopped)
        for why in newly:
            logger.warning(f"{why}; the other ranks go on")
        t1 = time.perf_counter()
        self.waited_s += t1 - t0
        try:
            if due:
                self._write(messages)
        finally:
            for r, buf in messages.items():
                self._receivers[r].give_back(buf)
        self.written_s += time.perf_counter() - t1
        self._report()

    def _write(self, messages: dict) -> None:
        import torch

        for i, p in enumerate(self.probes):
            with p.panel.writing():
                p.write(self.renderer, self.world, p.tensor.detach().reshape(-1).view(torch.uint8))
                if self.collective:  # this step's payloads, received on this thread (_exchange)
                    for r, inbox in self._inbox.items():
                        p.write(r, self.world, inbox[i].reshape(-1).view(torch.uint8))
                    continue
                for r, buf in messages.items():
                    h = buf[:HEADER_BYTES].view(torch.float64).tolist()
                    if h[0] != MAGIC or h[2] != self._layout_code():
                        self.ranks[r].stopped = (f"rank {r} attached other probes: attach the same probes "
                                                 "(names, shapes, dtypes, order) on every rank")
                        continue
                    start = HEADER_BYTES + p.offset
                    p.write(r, self.world, buf[start:start + p.nbytes])

    def _report(self) -> None:
        """Every panel's title and the status line name the stopped ranks; the recorder gets each
        rank's throughput and memory at every step it reported."""
        stopped = [s for s in self.ranks.values() if s.stopped]
        note = ", ".join(f"rank {s.rank} stopped" for s in stopped)  # the title: short (the step: status line)
        for p in self.probes:
            p.panel.note = note or p.caption  # what a stopped rank means comes first
        session = self.session
        if stopped:
            session.message = "; ".join(s.stopped for s in stopped)  # the status line: with the reason
        elif session.message.startswith("rank "):
            session.message = ""
        if self.recorder is None:
            return
        for r, s in self.ranks.items():
            if s.step <= self._logged.get(r, -1):
                continue
            self._logged[r] = s.step
            values = {f"throughput/rank{r}_steps_per_s": s.steps_per_s,
                      f"memory/rank{r}_rss_bytes": s.rss_bytes}
            if s.device_bytes:
                values[f"memory/rank{r}_device_bytes"] = s.device_bytes
            self.recorder.log(values, step=max(s.step, 0))

    def status(self) -> str:
        """One line: every rank's step, throughput and state."""
        return " · ".join(f"rank {s.rank}: step {s.step}, {s.steps_per_s:.1f} steps/s"
                          + (" (stopped)" if s.stopped else "") for s in self.ranks.values())

    def close(self) -> None:
        """Send the message still waiting (at most ``timeout_s``) and stop sending; receiver
        threads blocked on a peer are daemons and end with the process. A second close does nothing."""
        if self.closed:
            return
        self.closed = True
        if self._sender is not None and self.started and not self._sender.error:
            self._sender.offer(lambda buf: self._pack(buf, finished=True))
        if self._sender is not None:
            with self._sender.cond:
                self._sender.closing = True
                self._sender.cond.notify_all()
            self._sender.join(timeout=self.timeout_s)


_default: Gather | None = None
_OPEN: weakref.WeakSet = weakref.WeakSet()  # every Gather made, closed before its group goes


def gather(**options) -> Gather:
    """The process's default :class:`Gather`, which ``caliper_vk.attach``/``step`` use in a job.
    Made at the first call (on every rank) with ``options`` (see :class:`Gather`), e.g.
    ``gather(session=Session(...), recorder=rec)`` before the first attach."""
    global _default
    if _default is None:
        _default = Gather(**options)
        atexit.register(_default.close)  # the last message still goes out
    elif options:
        raise RuntimeError("the default Gather exists already; pass its options at the first "
                           "gather(...) call, before caliper_vk.attach")
    return _default
