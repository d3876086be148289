"""The module-level live API: ``attach``, ``step``, ``due``, ``status``, ``empty``.

They act on the innermost open :class:`~caliper_vk.live.Session`: the one made last and not yet
closed, so ``Session(window="web")`` followed by ``caliper_vk.attach(...)`` draws in that browser
session. When none is open, the first ``attach`` makes a default session: inside Jupyter a live
widget under the cell, else a window when a display is available, otherwise offscreen frames
written every 10 steps to a new folder ``caliper-frames/<date>_<time>/`` (printed), one per run.
"""

from __future__ import annotations

import atexit
import threading
import time
from pathlib import Path

from .live import Panel, Session, Status
from ._log import logger
from .live.opened import innermost

_lock = threading.Lock()
_session: Session | None = None  # the default session, when this module made one

FRAMES_ROOT = "caliper-frames"


def new_frames_dir(root=FRAMES_ROOT) -> Path:
    """A new, empty folder ``root/<date>_<time>`` (``-2``, ``-3`` ... when one was made in the same
    second) for one run's frames: runs never mix their frames in one folder."""
    base = Path(root) / time.strftime("%Y-%m-%d_%H-%M-%S")
    for k in range(1, 1000):
        d = base if k == 1 else base.with_name(f"{base.name}-{k}")
        try:
            d.mkdir(parents=True)
            return d
        except FileExistsError:
            continue
    raise FileExistsError(f"{base}: could not make a new frames folder beside 999 others")


def session() -> Session:
    """The session the module-level API acts on: the innermost open :class:`Session` (the one made
    last and not yet closed); when none is open, a default session made now."""
    global _session
    with _lock:
        current = innermost()
        if current is not None:
            return current
        from .engine.window import why_no_window
        from .live.sinks.notebook import in_notebook, rfb_available

        if in_notebook() and rfb_available():
            _session = Session()  # the live widget under the cell
        elif (refused := why_no_window()) is None:
            _session = Session(window=True)
        else:
            out = new_frames_dir()
            _session = Session(window=False, out_dir=out, save_every=10)
            logger.info(f"no window ({refused}); writing a frame every 10 steps to {out}/")
        atexit.register(_session.close)
        return _session


def attach(tensor, view: str = "pointcloud", **options) -> Panel:
    """Draw ``tensor`` with ``view`` in the innermost open session (a default session when none is
    open); see :meth:`Session.attach`.
    In a torch.distributed job, on every rank: the probes are gathered to the rendering rank
    (:mod:`caliper_vk.live.distributed`; ``ranks="concat"`` or ``"side"``)."""
    from .live import distributed

    if distributed.in_job():
        g = distributed.gather()
        g.default_session(session)
        return g.attach(tensor, view=view, **options)
    return session().attach(tensor, view=view, **options)


def add(view, name: str | None = None):
    """Show a host-fed view (e.g. ``Text`` samples) in the innermost open session."""
    return session().add(view, name=name)


def step(step: int | None = None) -> bool:
    """Draw a frame of the innermost open session unless the last is still in flight (in a
    distributed job: send this rank's probes, or gather and draw on the rendering rank). With no
    session open, nothing is drawn (False)."""
    from .live import distributed

    if distributed._default is not None:
        return distributed._default.step(step)
    current = innermost()
    return False if current is None else current.step(step)


def due(step: int | None = None) -> bool:
    """Whether the innermost open session's next ``step()`` would draw: skip computing what is
    only drawn when it would not be (see :meth:`Session.due`). In a distributed job the ranks
    that send are always due (every step's probes are sent)."""
    from .live import distributed

    if distributed._default is not None:
        return distributed._default.due(step)
    current = innermost()
    return False if current is None else current.due(step)


def status() -> Status:
    """The innermost open session's status (device, each panel's path, frame time, skips)."""
    return session().status()


def empty(shape, dtype=None, device="cpu"):
    """A tensor in memory the renderer reads in place (true zero-copy).

    ``device="cpu"`` gives page-aligned host memory imported through
    ``VK_EXT_external_memory_host``; ``"cuda"`` gives VRAM allocated by Vulkan and
    imported into CUDA (needs cuda-python); ``"mps"`` a plain MPS tensor, whose
    ``MTLBuffer`` MoltenVK imports. See docs/contract.md.
    """
    from .exporters import empty as shared_empty

    return shared_empty(shape, dtype, device)
