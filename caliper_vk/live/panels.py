"""Panels: what a session draws. A :class:`Panel` is an attached tensor (or several, for a
view that reads more than one) shown by a view; a :class:`HostPanel` a view fed from the host.

A panel holds its live input(s), its view, its title bar and notice, and the
write/read protocol of its tensor (:class:`~caliper_vk.live.protocol.WriteRead`).
``panel.session`` is the session that draws it (``close()`` detaches from it);
the protocol object itself holds no reference to the session.
"""

from __future__ import annotations

import contextlib

from .. import exporters
from ..exporters import PATH_HOST, PATH_STAGING
from ..engine import TimelineSemaphore
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
    protocol : WriteRead
        The write/read protocol of the tensor (one timeline semaphore).
    """

    def __init__(self, name: str, tensor, view, record, source, path: str, reason: str, *, session,
                 ordered: bool = True, more=()):
        self.name = name
        self.view = view
        self.record = record
        self.source = source
        self.path = path
        self.reason = reason
        self.session = session
        self._tensor = tensor  # the storage stays alive while attached (record.owner too)
        self._fingerprint = exporters.storage_fingerprint(tensor)
        self._on_host = tensor.device.type == "cpu"
        # further inputs of a view that reads several tensors: (tensor, fingerprint, on host, source);
        # one semaphore orders the writes to all of them (panel.writing() wraps any of them)
        self._more = [(t, exporters.storage_fingerprint(t), t.device.type == "cpu", s) for t, s in more]
        # GPU tensors: the exporter's producer-side sync (CUDA: on torch's stream; MPS: host)
        self._sync = record.semaphore if path != PATH_STAGING else None
        timeline = self._sync.timeline if self._sync else TimelineSemaphore(session.device)
        self.protocol = WriteRead(timeline, self._sync, ordered=ordered, mirrored=record.mirrored)
        self.error: str | None = None
        self.closed = False
        self.label, self.notice = chrome_for(self)
        self.title_warnings = (0, 0)

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
        with self.protocol.writing():
            yield

    def _refresh(self) -> None:
        """Per-frame host work: storage checks, and the copy for non-CPU staging."""
        exporters.check_unchanged(self._tensor, self._fingerprint, self.name)
        if not self._on_host and self._sync is None:  # staged: imported GPU memory needs no copy
            host = self._tensor.detach().to("cpu")
            self.source.array, _ = exporters.numpy_alias(host)
        for tensor, fingerprint, on_host, source in self._more:
            exporters.check_unchanged(tensor, fingerprint, self.name)
            if not on_host:
                source.array, _ = exporters.numpy_alias(tensor.detach().to("cpu"))

    def _begin_read(self) -> tuple | None:
        return self.protocol.begin_read()

    @property
    def status(self) -> str:
        return panel_status(self.name, self.path, self.reason, self.error)

    def _release(self) -> None:
        """What detaching frees (the session calls it once no frame reads the panel)."""
        self.closed = True
        self.view.close()  # closes the source and its import (deferred until the GPU is done)
        self.label.close()
        self.notice.close()
        self.protocol.close()  # CUDA's import of the semaphore first, then the semaphore
        self._tensor = None
        self._more = []

    def close(self) -> None:
        """Detach: the panel leaves the session; its import is freed once the GPU is done."""
        if not self.closed:
            self.session._detach(self)


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

    def _refresh(self) -> None:
        pass

    def _begin_read(self) -> tuple:
        return ()

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
            self.session._detach(self)
