"""A live session's kept frames written into a run (``Session.save_history``): each kept input
becomes an array probe at its step, which ``caliper view`` and ``caliper render`` read."""

from __future__ import annotations

import numpy as np


def save_history(session, run):
    """Write ``session``'s kept frames into a run as array probes (see ``Session.save_history``).

    ``run`` is a :class:`~caliper_vk.record.Recorder` (the probes join the run it is recording)
    or a folder for a new run (written and closed here). Each kept input becomes probe
    ``live/<panel>`` (``live/<panel>/<i>`` for a panel's further inputs) at its step, with its
    identity: ``module`` the view, ``example`` the step it was drawn at, ``kind`` ``"live frame"``.
    bfloat16 is written as the float32 values it decodes to (exactly). Returns the run's folder.
    """
    from ..record import Recorder

    history = session.history
    if history is None:
        raise RuntimeError("this session keeps no history; open it with Session(history='256MB')")
    session.wait_idle()
    own = not hasattr(run, "probe")
    rec = Recorder(run, config={"source": "caliper_vk live history", "budget_bytes": history.budget}) \
        if own else run
    try:
        for frame in list(history.frames):
            arrays = history.arrays(frame)
            for k in frame.inputs:
                a = arrays[(k.panel, k.index)]
                if k.dtype == "bfloat16":
                    a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
                name = f"live/{k.panel}" + (f"/{k.index}" if k.index else "")
                rec.probe(name, a, module=k.view, example=f"drawn at step {frame.step}",
                          kind="live frame", step=frame.step)
    finally:
        history._shown = None
        if own:
            rec.close()
    return rec.dir
