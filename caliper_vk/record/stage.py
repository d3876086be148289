"""Device values on their way to the run: copied to host memory without waiting, written when they arrive.

A training step's statistics (``watch``'s norms, histogram counts, a logged loss
tensor) are computed on the device that trains. Reading one with ``.item()`` or
``.tolist()`` makes the host wait for the device stream: the whole queue of
work ahead of it drains, and the next step's kernels are not queued until it
has. :class:`Staging` never does that on the training step: each batch of values
is copied into pinned host memory with ``non_blocking=True`` behind the work
that computes it, a CUDA event is recorded after the copy, and the batch is
handed to its writer once the event has passed: on a later call (``poll``),
normally the next step. Batches are written in the order they were put, so the
log keeps its order; a record with no device value that is put while batches
are on their way waits its turn behind them.

Bounds: at most :data:`MAX_IN_FLIGHT` batches are on their way; one more waits
for the oldest (a device that runs that far behind the host is rare, and the
wait is what keeps host memory bounded). ``drain()`` waits for all of them: the
recorder calls it on ``close()``, ``export()`` and at the end of an epoch, not
on a step.

On the CPU a tensor is already in host memory: a batch is written at once,
read through ``Tensor.numpy()`` (no ``.item()``, no copy), unless a collective
still writes it (``works``: the sum of sharded norms across ranks, :mod:`.shards`),
which the batch waits for as for an event. Other devices (MPS)
copy with ``non_blocking=True`` and are written on the next poll.
"""

from __future__ import annotations

from collections import deque

import numpy as np

MAX_IN_FLIGHT = 16


class _Batch:
    __slots__ = ("event", "host", "works", "write")

    def __init__(self, host, event, write, works=()):
        self.host, self.event, self.write, self.works = host, event, write, tuple(works)

    def arrived(self) -> bool:
        return all(w.is_completed() for w in self.works) and (self.event is None or self.event.query())

    def wait(self) -> None:
        for w in self.works:
            w.wait()
        if self.event is not None:
            self.event.synchronize()


def _to_host(t):
    """``(host tensor, event or None)``: ``t`` copied into host memory without waiting."""
    import torch

    t = t.detach()
    if t.device.type == "cpu":
        return t, None
    if t.device.type == "cuda":
        host = t.to("cpu", non_blocking=True)  # (torch pins the memory of a non-blocking copy to host)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(t.device))
        return host, event
    return t.to("cpu", non_blocking=True), None


class Staging:
    """An ordered queue of batches of device values on their way to host memory."""

    def __init__(self):
        self._queue: deque[_Batch] = deque()
        self._writing = False

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, tensor, write, works=()) -> None:
        """Copy ``tensor`` (any device) to host memory and call ``write(array)`` with its values
        (a numpy array) once they have arrived; ``tensor=None``: call ``write(None)`` in turn.
        ``works``: collectives still writing ``tensor`` (a gloo ``all_reduce`` started with
        ``async_op``): its values have arrived when they have completed too."""
        if tensor is None:
            host, event = None, None
        else:
            host, event = _to_host(tensor)
        if event is None and not works and (self._writing or not self._queue):
            # nothing ahead of it (or a writer logging as it writes: part of the batch in hand)
            write(None if host is None else np.asarray(host.numpy()))
            return
        self._queue.append(_Batch(host, event, write, works))
        if len(self._queue) > MAX_IN_FLIGHT:
            self._queue[0].wait()
        self.poll()

    def poll(self) -> int:
        """Write the batches that have arrived, oldest first, stopping at the first still on its
        way. Returns how many are still on their way."""
        return self._run(wait=False)

    def drain(self) -> None:
        """Wait for every batch on its way and write it (close, export, the end of an epoch)."""
        self._run(wait=True)

    def _run(self, wait: bool) -> int:
        if self._writing:  # put() from inside a writer: the outer loop goes on
            return len(self._queue)
        self._writing = True
        try:
            while self._queue:
                head = self._queue[0]
                if not head.arrived():
                    if not wait:
                        break
                    head.wait()
                self._queue.popleft()
                head.write(None if head.host is None else np.asarray(head.host.numpy()))
        finally:
            self._writing = False
        return len(self._queue)
