"""Attaching: tensors → live inputs (through the exporters) → a view → a :class:`Panel`.

Everything here happens once per ``Session.attach``; nothing here runs per frame.
A failure at any point releases what was already exported (handles, GPU sync),
so a bad view name or option leaves nothing behind.
"""

from __future__ import annotations

import sys

from .. import exporters
from ..engine.external import HostImportError, import_host_pointer
from ..exporters import PATH_DEVICE_COPY, PATH_STAGING, PATH_ZERO_COPY
from ..views._source import Source
from .panels import Panel


def _live_source(device, tensor, record, view, zero_copy: bool):
    """A live :class:`Source` over ``tensor`` (imported in place when possible), its path and why."""
    # a view of the tensor's memory (CPU), or of a host copy refreshed every frame
    alias, dtype = exporters.numpy_alias(tensor if tensor.device.type == "cpu" else tensor.detach().to("cpu"))
    path, reason, imported = PATH_STAGING, record.reason, None
    if not view.gpu_reads_source:
        reason = view.host_reason  # the view draws a host-computed transform of the tensor
    elif record.kind != "staging" and not zero_copy:
        reason = "zero_copy=False was requested"
    elif record.kind == "host-pointer":
        try:
            imported = import_host_pointer(device, record.handle, record.nbytes, keepalive=record.owner)
            path = PATH_ZERO_COPY
        except HostImportError as exc:
            reason = f"the driver refused the import: {exc}"
    elif record.kind in exporters.GPU_KINDS:
        try:
            imported = exporters.import_external(device, record)
            path = PATH_DEVICE_COPY if record.mirrored else PATH_ZERO_COPY
        except exporters.ExternalMemoryError as exc:
            reason = f"the driver refused the import: {exc}"
    if imported is None:
        exporters.release(record)  # the tensor is staged: free its unused handle and GPU sync
    return Source(alias, dtype, imported=imported, live=True), path, reason


def live_sources(session, name, tensors: dict, v, view, named: bool, extra: dict, zero_copy: bool, *,
                 ordered: bool) -> Panel:
    """Export ``tensors``, give view ``v`` their live inputs, and return the panel over them."""
    device = session.device
    view_name = view if isinstance(view, str) else type(view).__name__.lower()
    records = {}
    try:
        if named and not hasattr(v, "set_sources"):
            raise TypeError(f"the {view_name} view reads one tensor; attach a tensor, not a dict")
        # GPU interop serves single-input panels (one semaphore orders one tensor's writes)
        for k, t in tensors.items():
            records[k] = exporters.export(t, device.info, f"{name}.{k}" if named else name,
                                          device=None if named else device)
    except Exception:
        for record in records.values():
            exporters.release(record)
        if isinstance(view, str):
            v.close()
        raise
    feeds = {k: _live_source(device, tensors[k], records[k], v, zero_copy) for k in tensors}
    try:
        if named:
            v.set_sources({k: f[0] for k, f in feeds.items()})
        elif view == "pointcloud":
            v.set_source(feeds[name][0], **extra)
        elif extra:
            raise TypeError(f"{', '.join(extra)} only apply to the pointcloud view")
        else:
            v.set_source(feeds[name][0])
    except Exception:
        for source, _, _ in feeds.values():
            source.close()
        for record in records.values():
            exporters.release(record)
        if isinstance(view, str):
            v.close()
        raise
    first = next(iter(tensors))
    _, path, reason = feeds[first]
    slower = [(k, p, r) for k, (_, p, r) in feeds.items() if p != PATH_ZERO_COPY]
    if named and slower:  # the panel is as fast as its slowest input
        path, reason = slower[0][1], "; ".join(f"{k}: {r}" for k, _, r in slower)
    return Panel(name, tensors[first], v, records[first], feeds[first][0], path, reason, session=session,
                 ordered=ordered,
                 more=[(tensors[k], feeds[k][0]) for k in tensors if k != first])


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
        print(f"caliper: panel {name} stopped: {exc}", file=sys.stderr)
        return exc.summary, f"{name} stopped"
    return None, ""
