"""Run files: reading a run from a log, a ``run.json`` (either schema) or TensorBoard events,
and writing ``run.json`` with its memory-mapped sidecar (the format: ``docs/run-format.md``).

Reading never executes anything: JSON only, arrays as raw little-endian bytes of a
whitelisted dtype. A record or entry that is malformed is skipped and described in
``run.problems`` (the rest of the run loads); a file that cannot be a run at all raises
``RunFileError`` naming the file and field.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import tempfile
from pathlib import Path

import numpy as np

from . import pyramid
from .mapped import map_file, release_pages
from .log import Payload, RunFileError, decode_array, encode_array
from .builder import _Builder, _same_steps, _text, run_from_log
from .histcols import from_columns
from .run import _EMPTY_F, _EMPTY_I, Run, Series

RUN_SCHEMA = "caliper-run/3"  # what save_run writes: arrays in a memory-mapped sidecar, histograms
# as columns
SIDECAR_SCHEMAS = ("caliper-run/2", RUN_SCHEMA)  # the schemas whose arrays are in a sidecar
READ_SCHEMAS = ("caliper-run/1", *SIDECAR_SCHEMAS)  # what load_run reads (/1: arrays as base64 in the
# JSON; /2: a histogram's frames one object each)
SIDECAR_MAGIC = b"caliper-run-data/1\n"
SIDECAR_ALIGN = 64  # every array starts on a 64-byte boundary of the sidecar
MAX_RUN_BYTES = 4 << 30


def save_run(run: Run, path, columns=None) -> Path:
    """Write ``run.json`` (schema ``caliper-run/3``) and its sidecar of arrays, atomically.

    ``columns(doc, sidecar)``, when given, adds columns that are not in ``run`` (the recorder's
    spooled scalar columns, :mod:`.columns`) to the document before it is written.

    The arrays go to ``run-<token>.bin`` beside ``path`` (written, synced, then renamed into
    place), the document naming it goes to a temporary file renamed over ``path``, and only
    then are older sidecars removed: a crash at any point leaves the old pair or the new one.
    """
    path = Path(path)
    sidecar = _SidecarWriter()
    doc = run.to_json(sidecar.add, RUN_SCHEMA)
    if columns is not None:
        columns(doc, sidecar)
    data_name = f"{path.stem}-{secrets.token_hex(6)}.bin"
    doc["data"] = {"file": data_name, "bytes": sidecar.size}
    _write_atomically(path.parent / data_name, sidecar.chunks)
    text = json.dumps(_json_safe(doc), separators=(",", ":"), allow_nan=False).encode()
    _write_atomically(path, [text])
    for old in path.parent.glob(f"{path.stem}-*.bin"):  # sidecars of earlier saves
        if old.name != data_name:
            try:
                old.unlink()
            except OSError:  # in use on a platform that cannot unlink an open file: left
                pass
    return path


class _SidecarWriter:
    """Arrays laid end to end, each on a SIDECAR_ALIGN boundary after the magic line; ``add``
    returns the reference the document stores (``{"dtype", "shape", "at"}``)."""

    def __init__(self):
        self.chunks = [SIDECAR_MAGIC]
        self.size = len(SIDECAR_MAGIC)
        self._seen: dict = {}  # id(array) -> (array, reference): a shared column is stored once

    def add(self, a) -> dict:
        hit = self._seen.get(id(a))
        if hit is not None and hit[0] is a:  # series logged together share one step column
            return dict(hit[1])
        ref = encode_array(a, raw=True)
        data = ref.pop("raw")
        pad = -self.size % SIDECAR_ALIGN
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        ref["at"] = self.size
        self.chunks.append(data)
        self.size += len(data)
        self._seen[id(a)] = (a, dict(ref))
        return ref

    def add_pieces(self, dtype, count: int, pieces: list, shape=None) -> dict:
        """A 1-D column of ``count`` values of ``dtype`` (or an array of ``shape``, ``count``
        values in all) made of ``pieces``: bytes, or ``(fd, offset, length)`` of a file to copy
        from when the sidecar is written (a spooled column)."""
        pad = -self.size % SIDECAR_ALIGN
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        shape = [int(count)] if shape is None else [int(n) for n in shape]
        ref = {"dtype": np.dtype(dtype).name, "shape": shape, "at": self.size}
        total = 0
        for piece in pieces:
            self.chunks.append(piece)
            total += len(piece) if isinstance(piece, bytes) else piece[2]
        if total != count * np.dtype(dtype).itemsize:
            raise ValueError(f"column pieces hold {total} bytes, not {count} values of {np.dtype(dtype).name}")
        self.size += total
        return ref


def _write_atomically(path: Path, chunks) -> None:
    """``chunks`` into ``path`` by a synced temporary file renamed over it, with an ordinary
    file's permissions (mkstemp makes 0600)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                if isinstance(c, tuple):  # (fd, offset, length): copied from that file
                    src, at, n = c
                    while n > 0:
                        data = os.pread(src, min(n, 16 << 20), at)
                        if not data:
                            raise OSError(f"{path}: a column's spool ended early")
                        f.write(data)
                        at, n = at + len(data), n - len(data)
                else:
                    f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask, read without setting it (os.umask would change it for every thread
    for a moment); 0o022 where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_safe(x) for x in v]
    if isinstance(v, np.generic):
        return _json_safe(v.item())
    return v


# -- validation helpers ---------------------------------------------------------------


def run_from_json(path) -> Run:
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_RUN_BYTES:
        raise RunFileError(f"{path}: {size} bytes is more than the {MAX_RUN_BYTES} allowed for a run file")
    try:
        text = path.read_bytes()
        refs = _Refs()
        head = json.loads(text, object_hook=refs.hook) if b'"at"' in text else json.loads(text)
    except RecursionError:
        raise RunFileError(f"{path}: nested too deeply to be a run file") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: not JSON ({str(exc)[:100]})") from None
    if isinstance(head, dict) and head.get("schema") in SIDECAR_SCHEMAS and "data" in head:
        refs.resolve(head, path)
        run = run_from_doc(head, path)
        release_pages(refs.mapped)  # the checks read the step columns: nothing stays resident
        return run
    return run_from_doc(head, path)


class _Refs:
    """Sidecar references (``{"dtype", "shape", "at"}``) found while a ``caliper-run/2`` or ``/3``
    document is parsed, given their bytes from the memory-mapped sidecar afterwards: each
    becomes an array object whose data is a view of the mapping (no copy, nothing read yet)."""

    def __init__(self):
        self.found: list = []
        self.mapped = np.zeros(0, np.uint8)  # the sidecar's mapping, once resolved

    def hook(self, d: dict) -> dict:
        if "at" in d and "dtype" in d and "shape" in d and "b64" not in d:
            self.found.append(d)
        return d

    def resolve(self, doc: dict, path: Path) -> None:
        refs = self.found
        data = doc.get("data")
        name = data.get("file") if isinstance(data, dict) else None
        if not isinstance(name, str) or "/" in name or "\\" in name or not name.endswith(".bin"):
            raise RunFileError(f"{path.name}.data.file: expected the name of a .bin file beside it")
        side = path.parent / name
        try:
            size = side.stat().st_size
        except OSError:
            raise RunFileError(f"{path.name}: its arrays' file {name} is missing (copy it along with "
                               "run.json, or open the run directory to read log.jsonl)") from None
        if size != data.get("bytes"):
            raise RunFileError(f"{path.name}.data: {name} has {size} bytes, the run says {data.get('bytes')}")
        # a plain read-only array over the mapping (np.memmap's subclass hooks cost ~20 us per
        # slice: a run with thousands of frames spent most of its open in them)
        with open(side, "rb") as f:
            mm = self.mapped = map_file(f, size) if size else np.zeros(0, np.uint8)
        if bytes(mm[:len(SIDECAR_MAGIC)]) != SIDECAR_MAGIC:
            raise RunFileError(f"{path.name}: {name} is not a Caliper array file")
        views: dict = {}
        for d in refs:
            at = d.pop("at")
            if not isinstance(at, int) or isinstance(at, bool) or not len(SIDECAR_MAGIC) <= at <= size:
                d["b64"] = Payload(None, f"at: {str(at)[:20]!r} is not an offset into {name} "
                                         f"({len(SIDECAR_MAGIC)}..{size})")
                continue
            # one payload per offset: references to one stored column decode to one array
            d["b64"] = views.setdefault(at, Payload.view(mm[at:]))  # decode_array sizes it


def _checked_steps(stored: np.ndarray, where: str, columns: list) -> tuple:
    """A metric's step column, checked (non-negative integers), sorted if it was not (with the
    order to apply to its values, else None), and shared with an equal column read before."""
    integers = stored.dtype.kind in "iub"
    least, in_order = _scan_steps(stored) if integers else (None, None)
    if len(stored) and (least < 0 if integers else (
            not np.all(np.isfinite(stored)) or stored.min() < 0 or not np.all(stored == np.floor(stored)))):
        raise RunFileError(f"{where}.step: steps must be non-negative integers")
    steps = stored.astype(np.int64, copy=False)
    order = None
    if len(steps) > 1 and not (in_order if integers else _scan_steps(steps)[1]):  # (in order: nothing to do)
        order = np.argsort(steps, kind="stable")
        steps = steps[order]
    return _same_steps(steps, columns), order


_CHECK = 1 << 20  # steps checked at a time (8 MB), their mapped pages handed back after each


def _scan_steps(steps: np.ndarray) -> tuple:
    """(the least step or None, whether the column never decreases) of an integer step column,
    read a piece at a time, so that a mapped column of ten million steps is never resident whole
    (nor a comparison of its size allocated)."""
    least, in_order = None, True
    for at in range(0, max(len(steps) - 1, 1), _CHECK):
        part = steps[at:at + _CHECK + 1]
        if len(part):
            m = int(part.min())
            least = m if least is None else min(least, m)
            in_order = in_order and not np.any(part[1:] < part[:-1])
        if len(steps) > _CHECK:
            release_pages(part)
    return least, in_order


def _unmarked(n: int) -> np.ndarray:
    """The placeholder column of a series without placeholders (most are): ``n`` read-only
    False values that take no memory (a broadcast scalar), where a column of its own per series
    would hold 1 MB per million steps once a scan touched it."""
    return np.broadcast_to(np.False_, (n,))


def _column(obj, where: str, dtype) -> np.ndarray:
    a = decode_array(obj, where)
    if a.ndim != 1:
        raise RunFileError(f"{where}: expected a 1-D column, got shape {a.shape}")
    if np.dtype(dtype).kind == "i" and a.dtype.kind == "f" and not (
            np.all(np.isfinite(a)) and np.all(a == np.floor(a))):
        raise RunFileError(f"{where}: steps must be integers")
    return a.astype(dtype, copy=False)


def _list(doc: dict, key: str, name: str) -> list:
    v = doc.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise RunFileError(f"{name}.{key}: expected a list, got {type(v).__name__}")
    return v


def run_from_doc(doc, path: Path) -> Run:
    name = path.name
    if not isinstance(doc, dict):
        raise RunFileError(f"{name}: expected a JSON object at the top level")
    schema = doc.get("schema")
    if schema not in READ_SCHEMAS:
        raise RunFileError(f"{name}.schema: {str(schema)[:40]!r} is not one of {', '.join(READ_SCHEMAS)}; "
                           "this caliper-vk reads those (a newer caliper-vk may read this one)")
    b = _Builder(doc["name"] if isinstance(doc.get("name"), str) else path.parent.name)
    run = b.run
    run.source = path
    run.config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    run.meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    status = doc.get("status", "running")
    if status not in ("running", "complete", "nonfinite", "interrupted", "failed"):
        raise RunFileError(f"{name}.status: unknown status {str(status)[:20]!r}")
    run.status = status
    run.ended = doc.get("ended") is True
    run.problems.extend(str(p)[:500] for p in _list(doc, "problems", name))
    progress = doc.get("progress") or {}
    if not isinstance(progress, dict):
        raise RunFileError(f"{name}.progress: expected an object")
    try:
        run.progress_step = _column(progress.get("step", []), f"{name}.progress.step", np.int64)
        run.progress_time = _column(progress.get("time", []), f"{name}.progress.time", np.float64)
        if progress.get("epoch") is not None:
            run.progress_epoch = _column(progress["epoch"], f"{name}.progress.epoch", np.float64)
        if len(run.progress_time) != len(run.progress_step) or (
                run.progress_epoch is not None and len(run.progress_epoch) != len(run.progress_step)):
            raise RunFileError(f"{name}.progress: step, epoch and time differ in length")
    except RunFileError as exc:
        run.problems.append(f"{exc}; progress coordinates are missing")
        run.progress_step, run.progress_time, run.progress_epoch = _EMPTY_I, _EMPTY_F, None
    metrics = doc.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise RunFileError(f"{name}.metrics: expected an object of name: series")
    finite = True
    known_finite = isinstance(doc.get("finite"), bool)  # else found out from every value below
    step_columns = [run.progress_step]
    checked: dict = {}  # id(stored step column) -> (column, its order or None): checked once
    for k, m in metrics.items():
        where = f"{name}.metrics[{k!r}]"
        try:
            if not isinstance(m, dict):
                raise RunFileError(f"{where}: expected an object")
            stored = decode_array(m.get("step"), f"{where}.step")
            values = decode_array(m.get("value"), f"{where}.value").astype(np.float64, copy=False)
            if stored.shape != values.shape or stored.ndim != 1:
                raise RunFileError(f"{where}: step and value differ in length")
            hit = checked.get(id(stored))
            if hit is None or hit[0] is not stored:
                hit = checked[id(stored)] = (stored, *_checked_steps(stored, where, step_columns))
            _, steps, order = hit
            if order is not None:
                values = values[order]
            ph = m.get("placeholder_steps") or []
            if not isinstance(ph, list) or not all(isinstance(x, int) for x in ph):
                raise RunFileError(f"{where}.placeholder_steps: expected a list of steps")
            goal = m.get("goal")
            if goal not in (None, "min", "max"):
                raise RunFileError(f"{where}.goal: expected 'min', 'max' or null")
            if not known_finite:
                finite &= bool(np.all(np.isfinite(values)))
            run.metrics[k] = Series(k, steps, values, np.isin(steps, ph) if ph else _unmarked(len(steps)),
                                    _text(m.get("unit"), f"{where}.unit"),
                                    _text(m.get("description"), f"{where}.description"), goal)
            if m.get("pyramid") is not None and order is None:  # (else built again when drawn)
                try:
                    run.metrics[k].pyramid = pyramid.from_doc(m["pyramid"], values, f"{where}.pyramid")
                except RunFileError as exc:
                    run.problems.append(f"{exc}; it is built again from the values when drawn")
        except RunFileError as exc:
            run.problems.append(f"{exc}; metric {k!r} is missing")
    run.finite = doc["finite"] if isinstance(doc.get("finite"), bool) else finite
    for section in ("histograms", "arrays", "confusions"):
        items = doc.get(section) or {}
        if not isinstance(items, dict):
            raise RunFileError(f"{name}.{section}: expected an object of name: [frames]")
        for k, frames in items.items():
            if section == "histograms" and isinstance(frames, dict):  # caliper-run/3: columns
                try:
                    hist = from_columns(frames, f"{name}.histograms[{k!r}]")
                    if hist:  # (as a list of no frames: no histogram)
                        run.histograms[k] = hist
                except RunFileError as exc:
                    run.problems.append(f"{exc}; histogram {k!r} is missing")
                continue
            if not isinstance(frames, list):
                run.problems.append(f"{name}.{section}[{k!r}]: expected a list of frames; missing")
                continue
            for i, f in enumerate(frames):
                where = f"{name}.{section}[{k!r}][{i}]"
                if not isinstance(f, dict):
                    run.problems.append(f"{where}: expected an object; frame skipped")
                    continue
                b.add({**f, "t": {"histograms": "hist", "arrays": "array", "confusions": "confusion"}[section],
                       "name": k}, where)
    for i, s in enumerate(_list(doc, "snapshots", name)):
        if isinstance(s, dict):
            b.add({**s, "t": "snapshot"}, f"{name}.snapshots[{i}]")
        else:
            run.problems.append(f"{name}.snapshots[{i}]: expected an object; skipped")
    for i, e in enumerate(_list(doc, "epochs", name)):
        if isinstance(e, dict):
            b.add({**e, "t": "epoch"}, f"{name}.epochs[{i}]")
    for i, e in enumerate(_list(doc, "events", name)):
        if isinstance(e, dict):
            b.add({**e, "t": "event"}, f"{name}.events[{i}]")
        else:
            run.problems.append(f"{name}.events[{i}]: expected an object; skipped")
    for frames in (*run.histograms.values(), *run.arrays.values(), *run.confusions.values()):
        frames.sort(key=lambda f: f.step)
    run.snapshots.sort()
    run.events.sort(key=lambda e: e[0])
    return run


def load_run(path) -> Run:
    """Read a run from a directory, a ``log.jsonl``, a ``run.json`` or TensorBoard event files."""
    path = Path(path)
    if not path.exists():
        raise RunFileError(f"{path}: no such file or directory")
    if path.is_dir():
        log, doc = path / "log.jsonl", path / "run.json"
        if doc.exists() and (not log.exists() or doc.stat().st_mtime >= log.stat().st_mtime):
            return run_from_json(doc)
        if log.exists():
            return run_from_log(log)
        from .tensorboard import event_files, run_from_tensorboard

        if event_files(path):
            return run_from_tensorboard(path)
        raise RunFileError(f"{path}: no run here (expected log.jsonl, run.json or TensorBoard event files)")
    if path.name.startswith("events.out.tfevents"):
        from .tensorboard import run_from_tensorboard

        return run_from_tensorboard(path)
    with open(path, "rb") as f:
        head = f.read(64)
    if head.lstrip().startswith(b'{"t":"header"'):
        return run_from_log(path)
    return run_from_json(path)


def find_runs(path) -> list[Path]:
    """Run directories under ``path`` (itself, or its subdirectories holding runs), sorted."""
    path = Path(path)
    if not path.exists():
        raise RunFileError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]

    def is_run(p: Path) -> bool:
        if (p / "log.jsonl").exists() or (p / "run.json").exists():
            return True
        from .tensorboard import event_files

        return bool(event_files(p))

    if is_run(path):
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and is_run(p))
