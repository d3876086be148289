"""Attaching: tensors → live inputs (the exporters' one way in) → a view → a :class:`Panel`.

Everything here happens once per ``Session.attach``; nothing here runs per frame.
The session imports no memory itself: :func:`caliper_vk.exporters.open_input`
hands back each tensor's live input (imported or staged, path, reason, sync),
and this module only wraps it in the view's :class:`Source`. A failure at any
point releases what was already opened, so a bad view name or option leaves
nothing behind.
"""

from __future__ import annotations


from .. import exporters
from .._arrays import is_torch_tensor
from ..exporters import PATH_ZERO_COPY
from ..views._source import Source
from .panels import Panel
from .._log import logger


def view_source(live) -> Source:
    """The view's :class:`Source` over a live input: its host array and its imported buffer."""
    # a GPU tensor read in place: its host array is the copy made at attach, not this frame's values
    current = live.imported is None or live.tensor.device.type == "cpu"
    return Source(live.array, live.dtype, imported=live.imported, live=True, current=current)


def _close(inputs: dict, sources: dict) -> None:
    for k, live in inputs.items():
        source = sources.get(k)
        if source is not None:
            source.close()
        elif live.imported is not None:
            live.imported.close()
        live.close()


def attach_panel(session, name, tensors: dict, v, view, named: bool, extra: dict, zero_copy: bool) -> Panel:
    """Open ``tensors``' live inputs, give view ``v`` their sources, and return the panel."""
    device = session.device
    view_name = view if isinstance(view, str) else type(view).__name__.lower()
    inputs, sources = {}, {}
    try:
        if named and not hasattr(v, "set_sources"):
            raise TypeError(f"the {view_name} view reads one tensor; attach a tensor, not a dict")
        host_reason = None if v.gpu_reads_source else v.host_reason
        first = next(iter(tensors))
        for k, t in tensors.items():
            # GPU interop serves single-input panels (one semaphore orders one tensor's writes);
            # the first input's sync orders the writes to all of a panel's inputs
            inputs[k] = exporters.open_input(t, device, f"{name}.{k}" if named else name,
                                             zero_copy=zero_copy, host_reason=host_reason,
                                             gpu=not named, sync=k == first)
            sources[k] = view_source(inputs[k])
        for key in ("labels", "values"):  # a point cloud's labels and values, read in place
            if not named and view == "pointcloud" and _in_place(key, extra.get(key)):
                inputs[key], sources[key] = _further_input(extra[key], device, f"{name}.{key}", zero_copy)
                extra = {**extra, key: sources[key]}
        if named:
            v.set_sources(sources)
        elif view == "pointcloud":
            v.set_source(sources[name], **extra)
        elif extra:
            raise TypeError(f"{', '.join(extra)} only apply to the pointcloud view")
        else:
            v.set_source(sources[name])
    except Exception:
        _close(inputs, sources)
        if isinstance(view, str):
            v.close()
        raise
    path, reason = inputs[first].path, inputs[first].reason
    slower = [(k, i.path, i.reason) for k, i in inputs.items() if i.path != PATH_ZERO_COPY]
    if named and slower:  # the panel is as fast as its slowest input
        path, reason = slower[0][1], "; ".join(f"{k}: {r}" for k, _, r in slower)
    return Panel(name, v, [(inputs[k], sources[k]) for k in inputs], path, reason, session=session,
                 ordered=session.sync)


IN_PLACE = {"labels": ("torch.int32", "torch.uint8"),
            "values": ("torch.float32", "torch.float16", "torch.bfloat16")}


def _in_place(key: str, tensor) -> bool:
    """A point cloud's ``labels=`` / ``values=`` that its shaders read in place: an int32 or
    uint8 labels tensor, a float32, float16 or bfloat16 values tensor (other tensors and host
    arrays are converted once, at attach)."""
    return is_torch_tensor(tensor) and str(tensor.dtype) in IN_PLACE[key]


def _further_input(tensor, device, name: str, zero_copy: bool):
    """The live input of a point cloud's labels or values tensor, and its source. Its writes
    are ordered by the positions' sync (``panel.writing()`` covers both); a GPU tensor that
    would be mirrored (a copy refreshed by its own sync) is staged instead: copied every frame."""
    live = exporters.open_input(tensor.reshape(-1), device, name, zero_copy=zero_copy, track=tensor, sync=False)
    if live.record.mirrored:
        if live.imported is not None:
            live.imported.close()
        live.close()
        live = exporters.open_input(tensor.reshape(-1), device, name, zero_copy=zero_copy, track=tensor,
                                    gpu=False, sync=False)
    return live, view_source(live)


def build(view, name: str) -> tuple[str | None, str]:
    """Compile a view's own shader now (custom panels): (the one-line error, the status message),
    or (None, ""). A failure stops only this panel: the error goes to stderr in full."""
    build_view = getattr(view, "build", None)
    if build_view is None:
        return None, ""
    from ..shader_module import ShaderError

    try:
        build_view()
    except ShaderError as exc:
        logger.warning(f"panel {name} stopped: {exc}")
        return exc.summary, f"{name} stopped"
    return None, ""
