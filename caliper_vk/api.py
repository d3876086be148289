"""The module-level live API: ``attach``, ``step``, ``status``, ``empty``.

They act on one default :class:`~caliper_vk.live.Session`, made on the first
``attach``: inside Jupyter a live widget under the cell, else a window when a
display is available, otherwise offscreen frames written to ``caliper-frames/``
every 10 steps. Make a ``Session`` yourself for any other arrangement.
"""

from __future__ import annotations

import atexit
import threading

from .live import Panel, Session, Status
from ._log import logger

_lock = threading.Lock()
_session: Session | None = None


def session() -> Session:
    """The default session (made on first use)."""
    global _session
    with _lock:
        if _session is None or _session.canvas is None:
            from .live import display_available
            from .live.sinks.notebook import in_notebook, rfb_available

            if in_notebook() and rfb_available():
                _session = Session()  # the live widget under the cell
            elif display_available():
                _session = Session(window=True)
            else:
                _session = Session(window=False, out_dir="caliper-frames", save_every=10)
                logger.info("no display; writing a frame every 10 steps to caliper-frames/")
            atexit.register(_session.close)
        return _session


def attach(tensor, view: str = "pointcloud", **options) -> Panel:
    """Draw ``tensor`` with ``view`` in the default session; see :meth:`Session.attach`.
    In a torch.distributed job, on every rank: the probes are gathered to the rendering rank
    (:mod:`caliper_vk.live.distributed`; ``ranks="concat"`` or ``"side"``)."""
    from .live import distributed

    if distributed.in_job():
        g = distributed.gather()
        g.default_session(session)
        return g.attach(tensor, view=view, **options)
    return session().attach(tensor, view=view, **options)


def add(view, name: str | None = None):
    """Show a host-fed view (e.g. ``Text`` samples) in the default session."""
    return session().add(view, name=name)


def step(step: int | None = None) -> bool:
    """Draw a frame of the default session unless the last is still in flight (in a
    distributed job: send this rank's probes, or gather and draw on the rendering rank)."""
    from .live import distributed

    if distributed._default is not None:
        return distributed._default.step(step)
    if _session is None:
        return False
    return _session.step(step)


def due(step: int | None = None) -> bool:
    """Whether the default session's next ``step()`` would draw: skip computing what is
    only drawn when it would not be (see :meth:`Session.due`). In a distributed job the ranks
    that send are always due (every step's probes are sent)."""
    from .live import distributed

    if distributed._default is not None:
        return distributed._default.due(step)
    if _session is None:
        return False
    return _session.due(step)


def status() -> Status:
    """The default session's status (device, each panel's path, frame time, skips)."""
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
