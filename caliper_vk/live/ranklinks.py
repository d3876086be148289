"""The links of a distributed job's probes: a sending rank's thread and the renderer's
receiver threads (see :mod:`caliper_vk.live.distributed` for the whole path).

A message is one uint8 tensor: a header of :data:`HEADER_WORDS` float64 words
(magic, step, layout checksum, payload bytes, steps/s, resident bytes, device
bytes, finished: 1 on a rank's last message), then each probe's bytes (8-byte aligned). Both threads use
blocking ``torch.distributed.send``/``recv`` on Caliper's gloo group: gloo's
``irecv`` cannot be polled and a ``wait(timeout)`` that expires closes the
connection, so waiting with a deadline is done on the renderer's side, and gloo
only reports a peer that is gone.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import time
from dataclasses import dataclass
from .._log import logger

TAG = 0x0CA1  # p2p tag of Caliper's messages on its group
HEADER_WORDS = 8  # float64: magic, step, layout, payload bytes, steps/s, rss bytes, device bytes, finished
HEADER_BYTES = 8 * HEADER_WORDS
MAGIC = 1_632_207.0


def short(exc: BaseException) -> str:
    """gloo's message without its source location and advice: ``Connection closed by peer``."""
    line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    line = re.sub(r"^\[[^\]]*\]\s*", "", line).split(". This is typically")[0]
    return re.sub(r"\s*\[[0-9a-fA-F.:]+\]:\d+", "", line)


def rss_bytes() -> float:
    from ..record.watch import _rss_bytes as rss

    return rss() or 0.0


def host_buffer(nbytes: int, pinned: bool):
    """A message buffer: pinned (page-locked) when it carries CUDA probes' bytes and CUDA is
    there, so the copies between it and the GPU need no pageable bounce."""
    import torch

    pin = pinned and torch.cuda.is_available()
    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=pin)


@dataclass
class RankState:
    """What the renderer knows of one rank."""

    rank: int
    step: int = -1  # the step of its latest message
    steps_per_s: float = 0.0
    rss_bytes: float = 0.0
    device_bytes: float = 0.0
    stopped: str = ""  # why it is no longer waited for ("" while it sends)
    seen: float = 0.0  # time.monotonic() of its latest message
    finished: bool = False  # its last message came (Gather.close): its connection may close


class Sender(threading.Thread):
    """A sending rank's thread: sends the latest offered message; a newer one replaces one
    still waiting (never the one being sent)."""

    def __init__(self, group, dst: int, nbytes: int, send, pinned: bool = False):
        super().__init__(name="caliper-send", daemon=True)
        self.group, self.dst, self._send = group, dst, send
        self.free = [host_buffer(nbytes, pinned) for _ in range(3)]
        self.pending = None
        self.cond = threading.Condition()
        self.error = ""
        self.sent = self.replaced = 0
        self.closing = False

    def offer(self, fill) -> bool:
        with self.cond:
            if self.error:
                return False
            if self.free:
                buf = self.free.pop()
            else:
                buf, self.pending = self.pending, None
                self.replaced += 1
        fill(buf)
        with self.cond:
            if self.pending is not None:
                self.free.append(self.pending)
                self.replaced += 1
            self.pending = buf
            self.cond.notify_all()
        return True

    def run(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.pending is not None or self.closing)
                if self.pending is None:
                    return
                buf, self.pending = self.pending, None
            try:
                self._send(buf)
                self.sent += 1
            except Exception as exc:  # the renderer is gone: stop sending, training goes on
                self.error = short(exc)
                logger.warning(f"rank's probes no longer reach the renderer ({self.error}); "
                               "training continues")
                return
            finally:
                with self.cond:
                    self.free.append(buf)


class Receiver(threading.Thread):
    """The renderer's thread for one rank: receives its messages and keeps the latest.

    Three buffers change hands under ``cond``: one being received into, at most one
    :attr:`latest` (a newer message replaces it), at most one taken by the renderer
    (:meth:`take`, then :meth:`give_back`), so a buffer is never written while read."""

    def __init__(self, rank: int, nbytes: int, recv, cond: threading.Condition, state: RankState,
                 pinned: bool = False):
        super().__init__(name=f"caliper-recv-{rank}", daemon=True)
        self.rank, self._recv, self.cond, self.state = rank, recv, cond, state
        self.free = [host_buffer(nbytes, pinned) for _ in range(3)]
        self.latest = None  # the newest complete message not yet taken
        self.error = ""

    def take(self):
        """The latest message (call with ``cond`` held), or None; give it back after use."""
        buf, self.latest = self.latest, None
        return buf

    def give_back(self, buf) -> None:
        with self.cond:
            self.free.append(buf)

    def run(self) -> None:
        import torch

        while True:
            with self.cond:
                buf = self.free.pop()
            try:
                self._recv(buf, self.rank)
            except Exception as exc:
                with self.cond:
                    self.error = short(exc)
                    self.cond.notify_all()
                return
            h = buf[:HEADER_BYTES].view(torch.float64).tolist()
            with self.cond:
                if self.latest is not None:
                    self.free.append(self.latest)  # replaced before the renderer took it
                self.latest = buf
                s = self.state
                s.step, s.steps_per_s, s.rss_bytes, s.device_bytes = int(h[1]), h[4], h[5], h[6]
                s.seen, s.finished = time.monotonic(), h[7] == 1.0
                self.cond.notify_all()
            if s.finished:
                return  # its last message: nothing follows, and a thread left in recv() aborts the exit


def close_before_destroy(dist, gathers) -> None:
    """Make ``torch.distributed.destroy_process_group`` close every open ``Gather`` of ``gathers`` whose
    group it destroys (all of them for the default group or none given) before destroying it.

    A job that ends cleanly calls it before exit, and ``atexit`` runs only after: a rank's last
    message (``finished``) could then no longer be sent, and the renderer would read the closed
    connection as a rank that stopped ("Connection closed by peer"). Installed once, at the first
    ``Gather``; a name imported before that (``from torch.distributed import
    destroy_process_group``) is not wrapped: call ``gather().close()`` first there."""
    original = dist.destroy_process_group
    if getattr(original, "_caliper_closes_gathers", False):
        return

    @functools.wraps(original)
    def destroy_process_group(group=None, *args, **kwargs):
        everything = group is None or group is dist.group.WORLD
        for g in list(gathers):
            if everything or group is g.group or group is g.decide_group:
                g.close()
        return original(group, *args, **kwargs)

    destroy_process_group._caliper_closes_gathers = True
    dist.destroy_process_group = destroy_process_group
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is not None and c10d.destroy_process_group is original:
        c10d.destroy_process_group = destroy_process_group
