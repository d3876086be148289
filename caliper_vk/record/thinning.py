"""How often ``watch`` takes the expensive records: :class:`RecordBudget` thins update ratios and
histograms to an interval that fits the recorder's share of the training loop's time.

With a live session there is one budget, not two: the session's (``Session(budget=)``) counts
``watch``'s hooks, the recorder's ``log`` and the callbacks' work as well as the frames, and the
recording's share is what that budget leaves after everything else Caliper does on the training
thread and after the frames the display is never starved of (:attr:`Budget.floor_rate`); the
frames then get what recording leaves (the session's credit is charged with it)."""

from __future__ import annotations

import math
import time

NICE = tuple(m * 10 ** e for e in range(5) for m in (1, 2, 5))  # the intervals RecordBudget chooses


class RecordBudget:
    """How often the expensive records (update ratios, histograms) fit the recorder's share of the
    training loop's time.

    ``watch``'s hooks report the seconds they take on the training thread (:meth:`spent`,
    split into what is recorded every step and what only the expensive steps add) and the
    loop's steps (:meth:`stepped`). Their running means give the cost ``c`` of a cheap step,
    the extra cost ``e`` of an expensive one and the loop's step time ``w``; the expensive
    records are then taken every ``k`` steps, the least of 1, 2, 5, 10, 20, 50 ... at least
    ``least`` with ``c + e / k ≤ share · w``. When even the scalars take more than the share,
    ``k`` is the longest interval (:data:`LONGEST`) and :meth:`label` says so. ``k`` is
    re-chosen every :data:`REVIEW` steps; each change is recorded by ``watch`` as
    ``record/expensive_every`` and said once on stderr.

    ``frames``: the live session's :class:`~caliper_vk.live.budget.Budget` when there is one; then
    ``c`` also holds the rest of what that budget was charged on the training thread per step
    (the recorder's ``log``, a callback's probes), and the share left to recording is less the
    frames' floor: with a cheap-step cost ``c``, an expensive extra ``e``, a frame floor ``f``
    seconds per second, ``k`` is the least with ``c + e / k + f · w ≤ share · w``.
    """

    LONGEST = 10_000
    REVIEW = 25
    WEIGHT = 0.2

    def __init__(self, share: float | None, least: int = 1, clock=time.perf_counter, frames=None):
        if share is not None and not 0 < share <= 1:
            raise ValueError(f"budget must be a share of the loop's time in (0, 1] (0.05 is 5%) or None, "
                             f"got {share!r}")
        self.share, self.least, self.clock = share, max(int(least), 1), clock
        self.every = self.least
        self.cheap: float | None = None  # seconds a step's hooks take, without the expensive part
        self.extra: float | None = None  # seconds the expensive records add to a step
        self.wall: float | None = None  # seconds from one step to the next
        self._last: float | None = None
        self._steps = 0
        self.frames = frames
        self.other: float | None = None  # seconds per step the session's budget counted besides the hooks
        self._charged = None if frames is None else frames.charged
        self._hooks = 0.0  # the hooks' seconds on this step (cheap + extra)

    def _mean(self, old, new):
        return new if old is None else old + self.WEIGHT * (new - old)

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def spent(self, cheap: float, extra: float | None = None) -> None:
        """A step's hook time: ``cheap`` seconds, and ``extra`` more when it was an expensive one."""
        self.cheap = self._mean(self.cheap, cheap)
        if extra is not None:
            self.extra = self._mean(self.extra, extra)
        self._hooks += cheap + (extra or 0.0)

    def stepped(self) -> bool:
        """An optimizer step ended: update the loop's step time; True when ``every`` changed."""
        now = self.clock()
        if self._last is not None:
            self.wall = self._mean(self.wall, now - self._last)
        self._last = now
        self._steps += 1
        if self.frames is not None:  # what else the session's budget was charged with on this step
            charged = self.frames.charged
            self.other = self._mean(self.other, max(charged - self._charged - self._hooks, 0.0))
            self._charged = charged
        self._hooks = 0.0
        if self.share is None or self._steps % self.REVIEW or self.wall is None or self.cheap is None:
            return False
        room = self.share * self.wall - self.cheap
        if self.frames is not None:  # one budget: the rest of Caliper's work and the frames' floor first
            room -= (self.other or 0.0) + self.frames.floor_rate * self.wall
        need = self.least
        if self.extra is not None and self.extra > 0:
            need = self.LONGEST if room <= 0 else max(need, math.ceil(self.extra / room))
        if need <= self.least:
            every = self.least
        else:
            every = min(next((n for n in NICE if n >= need), self.LONGEST), self.LONGEST)
        changed = every != self.every
        self.every = every
        return changed

    def label(self) -> str | None:
        """``recording: update ratios every 20 steps (≤5% of training)``, or None within budget
        at the requested interval."""
        if self.share is None or self.every == self.least:
            return None
        text = f"recording: update ratios and histograms every {self.every} steps (≤{100 * self.share:g}%"
        if self.frames is not None:
            text += " with the frames"
        scalars = (self.cheap or 0.0) + (self.other or 0.0)
        if self.cheap is not None and self.wall and scalars > self.share * self.wall:
            text += f"; the per-step scalars alone take {100 * scalars / self.wall:.1f}%"
        return text + ")"
