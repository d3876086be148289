"""Panels: what a session draws. A :class:`Panel` is an attached tensor (or several, for a
view that reads more than one) shown by a view; a :class:`HostPanel` a view fed from the host.

A panel holds its live input(s), its view, its title bar and notice, and the
write/read protocol of its tensor (:class:`~caliper_vk.live.protocol.WriteRead`).
``panel.session`` is the session that draws it (``close()`` detaches from it);
the protocol object itself holds no reference to the session.
"""

from __future__ import annotations

import contextlib

from ..exporters import PATH_HOST
from .protocol import WriteRead
from .status import chrome_for, panel_status


class Panel:
    """A tensor attached to a view in a session. Made by :meth:`Session.attach`.

    Attributes
    ----------
    path : str
        ``"zero-copy"``, ``"on-device copy"`` or ``"host staging"``.
    reason : str
        How the path came about (why, when it is not zero-copy).
    record : ExternalBuffer
        The contract record of the tensor.
    inputs : list of (LiveInput, Source)
        The panel's live inputs (one, or one per input of a view that reads several) and the
        view's source over each.
    protocol : WriteRead
        The write/read protocol of the panel's tensors (one timeline semaphore orders them all:
        ``panel.writing()`` wraps a write to any of them).
    """

    def __init__(self, name: str, view, inputs, path: str, reason: str, *, session, ordered: bool = True):
        self.session = session
        self.name = name
        self.view = view
        self.inputs = list(inputs)
        live, self.source = self.inputs[0]
        self.record = live.record
        self.path = path
        self.reason = reason
        self._tensor = live.tensor  # the storage stays alive while attached (the input holds it too)
        self.protocol = WriteRead(live.sync.timeline, live.sync, ordered=ordered, mirrored=live.record.mirrored)
        self.error: str | None = None
        self.note = ""  # a line for the title bar (a distributed job: which rank stopped)
        # the step since which nothing but this panel can reach its tensor (None: still reachable)
        self.stale_since: int | None = None
        self.closed = False
        self.label, self.notice = chrome_for(self)
        self.title_warnings = (0, 0)
        self.title_stats = None  # the view's stats the title was last made from

    @property
    def semaphore(self):
        return self.protocol.timeline

    @property
    def producer_wait_s(self) -> float:
        return self.protocol.wait_s

    @property
    def producer_writes(self) -> int:
        return self.protocol.writes

    @property
    def _writing(self) -> bool:
        return self.protocol.writing_now

    @contextlib.contextmanager
    def writing(self):
        """Wrap writes to the attached tensor: waits until no frame is reading it, then
        marks the new values ready for the next frame.

        >>> with panel.writing():          # doctest: +SKIP
        ...     emb.copy_(model.embed(x))
        """
        if self.closed:
            yield
            return
        budget = self.session.budget
        started = budget.clock()
        try:
            with self.protocol.writing():
                yield
        finally:
            budget.wrote(started)  # the training thread's time in Caliper (the overhead budget)

    def _refresh(self) -> None:
        """Per-frame host work: storage checks, and the copy for staged GPU tensors."""
        for live, source in self.inputs:
            t = live.ref()
            if t is None:  # nobody but this panel holds the tensor: nothing can write it any more
                if self.stale_since is None:
                    self._went_stale()
                continue
            # the input's own check, inline while it passes (a call per panel and frame saved);
            # refresh() raises naming the fix when the storage moved
            if (live.copies or (t.data_ptr(), t.shape) != live.fingerprint) and live.refresh(self.name):
                source.array = live.array.reshape(source.array.shape)  # a new host copy, the same shape

    def _went_stale(self) -> None:
        """The tensor can no longer be reached from anywhere but this panel (``.grad`` set to None by
        ``zero_grad()``, a module attribute given a new tensor): its last values stay on screen,
        and the title and the status line say since when instead of claiming a live path."""
        session = self.session
        drawn = session.drawn_step
        self.stale_since = drawn if drawn is not None else session.step_count
        self.note = f"not updated since step {self.stale_since}"
        self.title_stats, self.title_warnings = ("stale",), None  # the title is remade, with the note

    @property
    def shown_path(self) -> tuple[str, str]:
        """(path, reason) as the status line shows them: a stale panel claims no live path."""
        if self.stale_since is not None:
            return (f"not updated since step {self.stale_since}",
                    "nothing but this panel holds the tensor any more: attach the new one")
        return self.path, self.reason

    @property
    def status(self) -> str:
        return panel_status(self.name, *self.shown_path, self.error)

    def _release(self) -> None:
        """What detaching frees (the session calls it once no frame reads the panel)."""
        self.closed = True
        self.view.close()  # closes the sources and their imports (deferred until the GPU is done)
        self.label.close()
        self.notice.close()
        for live, _ in self.inputs:
            live.close()  # CUDA's import of the semaphore first, then the semaphore
        self._tensor = None
        self.inputs = []

    def close(self) -> None:
        """Detach: the panel leaves the session; its import is freed once the GPU is done."""
        if not self.closed:
            self.session.detach(self)


class HostPanel:
    """A view fed from the host (``Session.add``): no tensor, no import, no sync."""

    path = PATH_HOST
    reason = "fed from the host with set_data / append"
    semaphore = None
    protocol = None
    error = None
    producer_writes = 0
    producer_wait_s = 0.0
    _writing = False

    def __init__(self, name: str, view, *, session):
        self.name, self.view, self.session = name, view, session
        self._tensor = None
        self.closed = False
        self.label, self.notice = chrome_for(self)
        self.title_warnings = (0, 0)
        self.title_stats = None  # the view's stats the title was last made from

    def _refresh(self) -> None:
        pass

    @property
    def status(self) -> str:
        return panel_status(self.name, self.path, self.reason, self.error)

    def _release(self) -> None:
        self.closed = True
        self.view.close()
        self.label.close()
        self.notice.close()

    def close(self) -> None:
        if not self.closed:
            self.session.detach(self)
