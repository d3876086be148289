"""The sessions open in this process, oldest first.

The module-level API (``caliper_vk.attach``, ``add``, ``step``, ``due``, ``session``) acts on the
innermost one (:func:`innermost`): the session made last and not yet closed. A session joins when
it is made (:func:`join`) and leaves when it is closed (:func:`leave`); a closed session's
``step()`` draws nothing and says so once (:func:`closed_step`).
"""

from __future__ import annotations

import threading
import warnings
import weakref

_open: list = []
_lock = threading.Lock()
_told: weakref.WeakSet = weakref.WeakSet()  # closed sessions whose step() has said so


def innermost():
    """The most recently opened session that is still open, or None."""
    with _lock:
        return _open[-1] if _open else None


def join(session) -> None:
    with _lock:
        _open.append(session)


def leave(session) -> None:
    """``session`` is closed (a second call changes nothing)."""
    with _lock:
        if session in _open:
            _open.remove(session)


def closed_step(session) -> bool:
    """``step()`` on a closed session: draws nothing, says so once, and never fails the loop."""
    if session not in _told:
        _told.add(session)
        warnings.warn("this caliper session is closed: step() draws nothing (open a new Session, or "
                      "stop calling step() after close())", stacklevel=4)
    return False
