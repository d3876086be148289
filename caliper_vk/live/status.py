"""What a live session says about itself: the status line and each panel's title bar.

The status line is the honest account the design asks for: the device, which
path every panel got (``zero-copy``, ``on-device copy``, ``host staging``) and
why when it is not plain zero-copy, the frame time, skipped frames, the
producer's host wait where the platform has no GPU-side wait, and messages
(a panel stopped, drawing failed, a PNG saved). Titles carry the panel's name,
its warnings (values not drawn as NaN/Inf, values outside the range) and the
view's legend. Both are text drawn from the glyph atlas (:mod:`caliper_vk.chrome`)
a few times a second, not every frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import chrome
from ..chrome import LABEL_BACKGROUND, TextStrip
from ..engine.icd import cpu_fallback_note
from ..exporters import PATH_HOST, PATH_ZERO_COPY
from .memory import megabytes


@dataclass
class Status:
    """What :func:`caliper_vk.status` reports."""

    device: str
    panels: list = field(default_factory=list)  # (name, path, reason)
    frames: int = 0
    skipped: int = 0
    held: int = 0  # steps not drawn because of max_fps
    max_fps: float | None = None
    step: int = 0
    frame_ms: float = 0.0  # submit → seen complete (an upper bound: completion is seen at a step)
    window: str = "headless"
    paused: bool = False
    message: str = ""
    producer_wait_ms: float = 0.0  # mean host wait per write for frames still reading
    history: str = ""  # what the rewind history keeps (``history: steps 760–1000, 96 MB``)
    budget: str | None = None  # the overhead budget and the share measured (``≤5% of training: 4.1%``)
    # device memory Caliper allocated (canvases, mirrors, history, buffers); shown for GPUs, where it
    # is memory the training cannot have (a CPU device's is host memory, counted in the process's)
    device_memory: int = 0
    device_memory_cap: int | None = None  # Session(device_memory=)
    gpu: bool = False
    device_note: str = ""  # a problem with the device (an NVIDIA GPU without its Vulkan driver: why)

    @property
    def device_line(self) -> str:
        """The device and its kind, with a problem with it in brackets."""
        return self.device + (f" [{self.device_note}]" if self.device_note else "")

    def parts(self) -> list[tuple[str, str]]:
        """The line's items, most important first: ``(text, short text)`` (the short form is what a
        narrow line shows; ``""``: leave the item out there)."""
        parts = []
        plain = [p for p in self.panels if p[1] == PATH_ZERO_COPY]
        if len(self.panels) > 3 and plain:
            parts.append((f"{len(plain)} panels: zero-copy",) * 2)
        else:
            plain = []
        for name, path, reason in self.panels:
            if (name, path, reason) not in plain:
                quiet = path == PATH_HOST or (path == PATH_ZERO_COPY and "host sync" not in reason)
                parts.append((f"{name}: {path}" + ("" if quiet else f" ({reason})"), f"{name}: {path}"))
        parts.append((f"step {self.step}",) * 2)
        if self.paused:
            parts.append(("PAUSED (space)",) * 2)
        if self.message:
            parts.append((self.message, self.message))
        if self.budget:  # narrow: the share alone, without why saved frames take it over
            parts.append((self.budget, self.budget.split(" (")[0]))
        parts.append((f"frame <={self.frame_ms:.1f} ms", ""))
        if self.producer_wait_ms >= 0.05:
            parts.append((f"writer waited {self.producer_wait_ms:.1f} ms/write (host sync)", ""))
        parts.append((f"skipped {self.skipped}", ""))
        if self.max_fps:
            parts.append((f"≤{self.max_fps:g} fps", ""))
        if self.history:
            parts.append((self.history, ""))
        if self.gpu and self.device_memory:
            cap = f" (cap {megabytes(self.device_memory_cap)})" if self.device_memory_cap else ""
            parts.append((f"holds {megabytes(self.device_memory)} of device memory{cap}", ""))
        # caliper_vk.status() and caliper doctor always name the device; a narrow line keeps only a
        # problem with it (an NVIDIA GPU without its Vulkan driver)
        parts.append((self.device_line, self.device_line if self.device_note else ""))
        return parts

    def line(self, columns: int | None = None) -> str:
        """The status line; with ``columns``, fitted to that many characters without cutting an item:
        the least important items are shortened, then left out (an ``…`` says so), so the panels'
        paths and the step always show."""
        parts = self.parts()
        full = " · ".join(text for text, _ in parts)
        if columns is None or len(full) <= columns:
            return full
        kept = [text for text, _ in parts]
        for k in range(len(parts) - 1, -1, -1):  # shorten, least important first
            kept[k] = parts[k][1]
            line = " · ".join(t for t in kept if t)
            if len(line) <= columns:
                return line
        kept, dropped = [t for t in kept if t], False
        while len(kept) > 1:  # then leave out, least important first; an ``…`` says so where it fits
            line = " · ".join(kept)
            if len(line) + (len(" · …") if dropped else 0) <= columns or (dropped and len(line) <= columns):
                break
            kept.pop()
            dropped = True
        line = " · ".join(kept)
        if dropped and len(line) + len(" · …") <= columns:
            line += " · …"
        return line if len(line) <= columns else line[:max(0, columns - 1)] + "…"

    def __str__(self) -> str:
        return self.line()


def session_status(session) -> Status:
    """A :class:`Status` of ``session`` now (``Session.status()``)."""
    window = session.window
    panels = session.panels
    info = session.device.info
    gap = cpu_fallback_note(info)  # an NVIDIA GPU without its Vulkan driver: say why, and the fix
    return Status(
        device=f"{info.name} ({info.kind})", device_note=gap or "",
        panels=[(p.name, "stopped", p.error) if p.error else (p.name, *_shown(p)) for p in panels],
        frames=session.frames, skipped=session.skipped, held=session.held, max_fps=session.max_fps,
        step=session.step_count, frame_ms=session.pacing.frame_ms,
        window=("window" if window and window.alive else
                "display lost" if getattr(window, "lost", False) else
                "window closed" if window else "headless"),
        paused=session.paused, message=session.message,
        history=session.history.summary() if session.history else "",
        producer_wait_ms=1000 * sum(p.producer_wait_s for p in panels)
        / max(1, sum(p.producer_writes for p in panels)),
        budget=session.budget.label(session.pacing.save_every if session.pacing.saving else 0),
        device_memory=session.device.memory_stats["allocated_bytes"], device_memory_cap=session.device_memory,
        gpu=session.device.info.kind != "cpu")


def _shown(panel) -> tuple[str, str]:
    shown = getattr(panel, "shown_path", None)  # a host panel has only its path
    return shown if shown is not None else (panel.path, panel.reason)


def panel_status(name: str, path: str, reason: str, error: str | None) -> str:
    """One panel's part of the status line (``Panel.status``)."""
    if error:
        return f"{name}: stopped ({error})"
    if path == PATH_HOST or (path == PATH_ZERO_COPY and "host sync" not in reason):
        return f"{name}: {path}"
    return f"{name}: {path} ({reason})"


def chrome_for(panel) -> tuple[TextStrip, TextStrip]:
    """A panel's title bar and the notice shown in its place once it has stopped."""
    return (TextStrip(*title_items(panel), background=LABEL_BACKGROUND),
            TextStrip([(panel.error or "", chrome.ERROR)], background=chrome.BACKGROUND, block=True))


def warning_counts(view) -> tuple[int, int]:
    """(values not drawn as NaN/Inf, values outside the range) from the view's last frame."""
    stats = getattr(view, "stats", None)
    if not stats:
        return 0, 0
    get = stats.get  # per panel and frame: no generator
    return (get("nonfinite", 0) + get("nan", 0) + get("inf", 0) + get("posinf", 0) + get("neginf", 0),
            get("below", 0) + get("above", 0))


def title_items(panel) -> tuple[list, list]:
    """(left, right) items of a panel's title bar: its name; warnings, then the view's legend."""
    left = [(panel.name, chrome.FOREGROUND)]
    if panel.error:
        return left, [("stopped: " + panel.error.splitlines()[0], chrome.ERROR)]
    view = panel.view
    note = getattr(panel, "note", "")  # first on the right: cut last (a distributed job's ranks)
    right = [(f"{note}  ", chrome.WARNING)] if note else []
    bad, outside = warning_counts(view)
    if bad:
        right.append((f"{bad} NaN/Inf  ", chrome.NONFINITE))
    if outside:
        right.append((f"{outside} outside range  ", chrome.WARNING))
    try:
        right += view.legend()
    except Exception as exc:  # a legend must never stop the drawing
        right.append((f"(no legend: {type(exc).__name__})", chrome.DIM))
    return left, right


def update_titles(panels, periodic: bool) -> None:
    """Refresh title bars: a few times a second, and at once when a warning count changes."""
    for panel in panels:
        stats = getattr(panel.view, "stats", None)
        if not periodic and stats == panel.title_stats:
            continue  # per panel and frame: one dict compare while the counts stay
        panel.title_stats = dict(stats) if stats else stats
        warnings = warning_counts(panel.view)
        if periodic or warnings != panel.title_warnings:
            panel.title_warnings = warnings
            panel.label.set_items(*title_items(panel))


def refresh_chrome(session, now: float, force: bool = False) -> None:
    """The status line and the title bars before a frame is drawn (``now``: ``perf_counter()``).
    Text is drawn on the host: the status line a few times a second or when the message changed;
    a title at the same time, or at once when its panel's warning counts changed. ``force``: this
    frame leaves the process (a PNG, a video, a page, ``render()``): its chrome is made for it, so
    it states its own step, history and budget."""
    frame = session.frame
    periodic = force or now - frame.status_time > 0.25 or session.message != frame.status_message
    if periodic:
        bar = session.status_bar
        bar.set_text(session.status().line(bar.columns), warn=bool(session.message))
        frame.status_time, frame.status_message = now, session.message
    update_titles(session.panels, periodic)
