"""The overhead budget: Caliper takes at most a set share of the training loop's time.

``Session(budget=0.05)`` keeps the time the training thread spends in Caliper
at or under 5% of the loop's wall time by drawing fewer frames. A frame-rate
cap cannot do that: at 20 steps a second a 60 fps cap holds nothing back, and
on a CPU device every frame is time taken from training.

What counts as Caliper's time, measured with ``perf_counter`` on the thread
that calls ``step()``:

- every ``step()`` call, from entry to return (drawing or not);
- every ``panel.writing()`` block on that thread (the wait for a frame still
  reading, and the copy inside it), and every ``due()`` call;
- the span from a ``due()`` that answered True to the next ``step()``: the
  probe forward a loop runs only because a frame is due (``if due(): ...;
  step()``), with the writes inside it.
- every ``charging()`` block: ``watch``'s hooks, the recorder's ``log`` once
  ``watch(..., session=)`` has handed it this budget, the framework callbacks'
  work. Blocks nest and only the outermost counts, so nothing is counted twice.

``watch``'s thinning of its expensive records (:mod:`caliper_vk.record.thinning`)
takes its share of this budget, after the rest of Caliper's work and after the
frames' floor (:attr:`Budget.floor_rate`): one budget for recording and frames.

The loop's wall time is the time between one ``step()`` and the next. The
controller keeps a *credit* in seconds: each step adds ``budget ×`` the wall
time since the previous step and subtracts the Caliper time spent since. A
frame is drawn only when the credit covers what a frame is expected to cost
(the running mean of the last frames' cost: their ``step()`` plus their
``due()`` span), so the share stays at or under the budget step by step —
not only on average. The credit is bounded above (no burst of frames after a
pause) and below (a one-off cost, such as the first frame building its
pipelines, is forgiven after a couple of seconds).

A frame is also executed by the device: on a CPU Vulkan device (lavapipe) by
the driver's threads on the cores training runs on, on a GPU beside the
training's kernels. So on any device whose queue writes timestamps the session
times each frame's execution with Vulkan timestamps and counts it too
(:meth:`Budget.executed`), or what the training measurably lost while the frame
ran when that is more: the loop's own time over the steps the frame spanned,
against its time per step with no frame running (which also covers a training
stream held behind a frame it waits for).

Three things override it. The display is never starved: when no frame was
drawn for ``1 / min_fps`` seconds (5 s by default: ``min_fps=0.2``), the next
step draws whatever the credit. A person interacting with the view (a drag, a
scroll, a key in the window or the page) gets the next frame at once: what
they see answers their hand. And frames due to be saved (``save_every``) and
``render()`` are never held back. Their cost always counts, so the frames after
them wait until the credit is paid back. The status line shows the budget and the
share measured over the last few seconds (``≤5% of training: 4.1%``).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import warnings

# On a CPU Vulkan device (lavapipe) a live session's frames rasterise on one thread (unless
# LP_NUM_THREADS says otherwise): with one per core a frame took every core from training for its
# wall time, twice what its timestamps (the budget's measure of it) said on 2 cores.
TRAINING_RASTER_THREADS = 1
DEFAULT_BUDGET = "auto"  # 5%, or what CALIPER_VK_BUDGET says (default_share)
AUTO_SHARE = 0.05
DEFAULT_MIN_FPS = 0.2  # a frame at least every 5 s: the budget rules up to 5 s x budget per frame
# (250 ms at 5%, the GPT demo's 100 ms frame on lavapipe at 2%)
SHARE_WINDOW_S = 5.0  # time constant of the share the status line shows
FORGIVE_S = 2.0  # debts older than this much wall time (at the budget's rate) are forgiven
COST_WEIGHT = 0.3  # weight of the newest frame in the running cost estimate
CLEAR_WEIGHT = 0.05  # weight of the newest step in the running training time without a frame running
# a step longer than this many typical ones and than OUTLIER_S (a validation pass, a checkpoint) is
# not sampled; a frame's stall of a few typical steps is
OUTLIER_STEPS = 5.0
OUTLIER_S = 0.25


def parse_share(value):
    """A budget as a share: a number in (0, 1], or a string such as ``"0.05"`` or ``"5%"``; ``"off"``
    / ``"none"`` / ``0`` and None mean no budget. Raises ValueError naming the accepted forms."""
    if value is None or isinstance(value, bool):
        return value if value is None else _bad_share(value)
    if isinstance(value, str):
        raw = value.strip().lower()
        if raw in ("off", "none", "0", "0%"):
            return None
        try:
            share = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
        except ValueError:
            return _bad_share(value)
    elif isinstance(value, (int, float)):
        share = float(value)
    else:
        return _bad_share(value)
    return share if 0 < share <= 1 else _bad_share(value)


def _bad_share(value):
    raise ValueError(f"a budget is a share of the loop's time in (0, 1] (0.05, or '5%'), or 'off'/None for "
                     f"no budget; got {value!r}")


def default_share() -> float | None:
    """The budget of a session that names none: ``CALIPER_VK_BUDGET`` when set (a share such as
    ``0.1`` or ``10%``, or ``off``), else 5%. A value that is none of these is reported once (a
    warning) and the default is used: a typo in the environment never stops a training run. The
    test suite turns the budget off, so that tests of drawing are not held by how fast the machine
    running them is; the budget's own tests name theirs."""
    raw = os.environ.get("CALIPER_VK_BUDGET", "").strip()
    if not raw:
        return AUTO_SHARE
    try:
        return parse_share(raw)
    except ValueError:
        warnings.warn(f"CALIPER_VK_BUDGET={raw!r} is not a share of the loop's time (0.05, '5%') or 'off'; "
                      f"using the default budget of {AUTO_SHARE:.0%}", stacklevel=3)
        return AUTO_SHARE


def check_budget(budget, min_fps) -> None:
    if budget is not None and not (isinstance(budget, (int, float)) and not isinstance(budget, bool)
                                   and 0 < budget <= 1):
        raise ValueError(f"budget must be a share of the loop's time in (0, 1] (0.05, or '5%'), or None "
                         f"for no budget; got {budget!r}")
    if not (isinstance(min_fps, (int, float)) and not isinstance(min_fps, bool) and min_fps > 0):
        raise ValueError(f"min_fps must be a positive number of frames a second, got {min_fps!r}")


class Budget:
    """Decides whether a frame fits the budget, from the Caliper time it is told about.

    Parameters
    ----------
    share : float, str, None or "auto"
        The budget, as a share of the loop's wall time (0.05 or ``"5%"``); None draws every frame
        the session can (the frame-rate cap and in-flight frames still apply); ``"auto"``:
        :func:`default_share`.
    min_fps : float
        The display never goes longer than ``1 / min_fps`` seconds without a frame.
    clock : callable
        Seconds as a float (``time.perf_counter``); tests inject a fake one.

    The session calls :meth:`enter` / :meth:`leave` around every ``step()``,
    :meth:`due` when ``due()`` gets past the other checks, :meth:`wrote` after
    every ``panel.writing()`` block, and :meth:`allows` when ``step()`` must
    decide without an answer from ``due()``.
    """

    def __init__(self, share=DEFAULT_BUDGET, min_fps: float = DEFAULT_MIN_FPS, clock=time.perf_counter):
        if isinstance(share, str):
            share = default_share() if share == "auto" else parse_share(share)
        check_budget(share, min_fps)
        self.share = None if share is None else float(share)
        self.min_fps = float(min_fps)
        self.clock = clock
        self.credit = 0.0  # seconds of Caliper time the loop may still spend (as of the last step)
        self.cost: float | None = None  # expected Caliper seconds of one drawn frame
        self.spent = 0.0  # Caliper seconds since the last step() entry (writes, step() itself)
        self.last_entry: float | None = None
        self.last_frame = -math.inf  # when the last frame was drawn (its step() entry)
        self.opened: float | None = None  # due() said yes at this time; the span runs to step()
        self.answer: bool | None = None  # due()'s budget answer for the coming step
        self.thread: int | None = None  # the thread that calls step(): only its time is counted
        self.inside = 0.0  # Caliper seconds and wall seconds, decayed over SHARE_WINDOW_S
        self.wall = 0.0
        self.device_cost = 0.0  # running mean of a frame's execution on a CPU device (lavapipe)
        self.frames = 0  # frames drawn with the budget's leave (the first only seeds nothing)
        self.held = 0  # steps that drew nothing because the frame did not fit the budget
        self.interacting = False  # input arrived: the next step draws whatever the credit
        self._span = 0.0  # this step's due() span (part of the frame's cost)
        self._executed = 0  # frames whose execution time was reported
        # What training measurably loses while a frame runs (see executed()): the loop's own time
        # between steps, as a running mean over steps with no frame in flight, and summed over
        # the steps the frame in flight spanned
        self.clear_train: float | None = None
        self._busy = False  # a frame was in flight when the current step interval began
        self._busy_train, self._busy_steps = 0.0, 0
        self._device_spent = 0.0  # device time counted into spent since the last entry
        # Everything counted since the session began, as it is counted (never decayed): Caliper's
        # time on the training thread, and the frames' device time (or what training lost to them)
        self.host_total = 0.0
        self.device_total = 0.0
        self.charged = 0.0  # the part of host_total counted by wrote() / charge() / charging()
        self._depth = 0  # charging() blocks open on the training thread (nested ones count once)

    # -- what the session reports ---------------------------------------------------------
    @property
    def measured(self) -> float | None:
        """The share of the loop's wall time spent in Caliper over the last few seconds."""
        return self.inside / self.wall if self.wall > 0 else None

    def _fits(self, now: float) -> bool:
        if self.share is None or self.cost is None or self.interacting:
            return True
        if now - self.last_frame >= 1.0 / self.min_fps:
            return True  # never starve the display
        elapsed = 0.0 if self.last_entry is None else now - self.last_entry
        return self.credit + self.share * elapsed - self.spent >= self.cost + self.device_cost

    # -- the session's hooks ---------------------------------------------------------------
    def due(self, forced: bool = False) -> bool:
        """``due()`` got past the other checks: whether the frame fits (True always when
        ``forced``, a frame to be saved). A True answer starts the span counted as Caliper's."""
        if self.answer is None:
            self.answer = forced or self._fits(self.clock())
        if forced:
            self.answer = True
        if self.answer and self.opened is None:
            self.opened = self.clock()
        return self.answer

    def interacted(self) -> None:
        """Input arrived (a drag, a scroll, a key): the next step draws, whatever the credit."""
        self.interacting = True

    def allows(self) -> bool:
        """Whether ``step()`` may draw now: ``due()``'s answer for this step when it gave one
        (input polled by this step draws even after ``due()`` said no: its data is unchanged)."""
        allowed = self.interacting or (self.answer if self.answer is not None else self._fits(self.clock()))
        if not allowed:
            self.held += 1
        return allowed

    def wrote(self, started: float, ended: float | None = None) -> None:
        """A ``panel.writing()`` block that began at ``started`` has ended (at ``ended``: now)."""
        if self.opened is not None or self._depth:
            return  # inside a due() span or a charging() block: counted with it
        if self.thread is not None and threading.get_ident() != self.thread:
            return  # a producer thread's writes are not the training thread's time
        took = (self.clock() if ended is None else ended) - started
        self.spent += took
        self.host_total += took
        self.charged += took

    charge = wrote  # any other Caliper work on the training thread (a callback recording probes)

    @contextlib.contextmanager
    def charging(self, count: bool = True):
        """``with budget.charging(): ...`` — the block is Caliper's time on the training thread
        (a recorder's ``log``, a callback's probes). Blocks nest: only the outermost counts, so a
        ``rec.log`` inside a callback's block is counted once; inside a ``due()`` span the span
        counts it; on another thread it counts nothing. ``count=False``: the block's caller counts
        its time itself (``watch``'s hooks, with :meth:`charge`); what is inside still counts once."""
        if self.thread is not None and threading.get_ident() != self.thread:
            yield
            return
        started = self.clock()
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if count and not self._depth:
                self.wrote(started)

    @property
    def floor_rate(self) -> float:
        """Seconds per second of wall time that the frames take at the least: the frame the
        display is never starved of (one every ``1 / min_fps`` seconds, whatever the credit).
        What records the loop with this budget may take leaves this much to the frames."""
        if self.share is None or self.cost is None:
            return 0.0
        return (self.cost + self.device_cost) * self.min_fps

    def executed(self, seconds: float) -> None:
        """A frame ran ``seconds`` on the device (lavapipe draws on the cores training runs on, a
        GPU beside the training's kernels): that time is taken from training too, so it counts;
        or what the training measurably lost while the frame ran, when that is more. That loss
        is the loop's own time over the steps the frame spanned, less as many steps' worth of its
        time with no frame running: a frame can stall training in ways its timestamps do not see
        (ops waiting at a barrier for the thread whose core it took, a stream waiting for the
        frame), and where it does not, the timestamps count."""
        lost = None
        if self._busy_steps and self.clear_train is not None:
            lost = self._busy_train - self._busy_steps * self.clear_train
        self._busy_train, self._busy_steps = 0.0, 0
        charge = seconds if lost is None else max(seconds, lost)
        self.spent += charge
        self._device_spent += charge
        self.device_total += charge
        self._executed += 1
        if self._executed == 1:
            return  # the first frame compiles the shaders (llvmpipe JITs them): not a typical cost
        self.device_cost = charge if not self.device_cost else (
            (1 - COST_WEIGHT) * self.device_cost + COST_WEIGHT * charge)

    def enter(self) -> float:
        """``step()`` begins: fold the wall and Caliper time since the last step into the
        credit and the measured share. Returns the entry time for :meth:`leave`."""
        now = self.clock()
        self.thread = threading.get_ident()
        if self.opened is not None:
            self._span = now - self.opened
            self.spent += self._span
            self.host_total += self._span
            self.opened = None
        else:
            self._span = 0.0
        if self.last_entry is not None:
            dt = max(now - self.last_entry, 0.0)
            # the loop's own time between the last two steps: into the running mean with no frame
            # running, or summed for the frame in flight; an outlier such as a validation pass is
            # left out of both (inline: enter() runs every step, cache-cold)
            train, clear = dt - (self.spent - self._device_spent), self.clear_train
            if clear is None or train <= OUTLIER_STEPS * clear or train <= OUTLIER_S:
                if self._busy:
                    self._busy_train += train
                    self._busy_steps += 1
                else:
                    self.clear_train = train if clear is None else clear + CLEAR_WEIGHT * (train - clear)
            decay = math.exp(-dt / SHARE_WINDOW_S)
            self.inside = self.inside * decay + self.spent
            self.wall = self.wall * decay + dt
            if self.share is not None:
                cost = (self.cost or 0.0) + self.device_cost  # one frame, all of it
                self.credit = min(self.credit + self.share * dt - self.spent, cost)
                self.credit = max(self.credit, -(self.share * FORGIVE_S + cost))
        self.spent = 0.0
        self._device_spent = 0.0
        self.last_entry = now
        return now

    def leave(self, entered: float, drew: bool, inflight: bool | None = None) -> None:
        """``step()`` returns: its own time counts; a drawn frame updates the cost estimate.
        ``inflight``: whether a frame is still running after this step (default: ``drew``)."""
        took = self.clock() - entered
        self.spent += took
        self.host_total += took
        self._busy = drew if inflight is None else inflight
        self.answer = None
        if drew:
            if self.frames:  # the first frame builds pipelines and layouts: not a typical cost
                cost = took + self._span
                self.cost = cost if self.cost is None else (1 - COST_WEIGHT) * self.cost + COST_WEIGHT * cost
            self.frames += 1
            self.last_frame = entered
            self.interacting = False
        self._span = 0.0

    def label(self, save_every: int = 0) -> str | None:
        """The status line's part: ``≤5% of training: 4.1%``. ``save_every``: the session saves a
        frame every that many steps (offscreen recording); over the budget, the part says so,
        since those frames are never held back (``≤5% of training: 85.8% (saving every 5 steps)``)."""
        if self.share is None:
            return None
        got = self.measured
        # a share of the loop's time is at most all of it: the measure's windows can overlap a frame
        # executed across several steps, so it is capped where it would read as a fault
        got = None if got is None else min(got, 1.0)
        text = f"≤{100 * self.share:g}% of training: " + ("…" if got is None else f"{100 * got:.1f}%")
        if save_every and got is not None and got > self.share:
            text += f" (saving every {save_every} step{'s' * (save_every != 1)})"
        return text
