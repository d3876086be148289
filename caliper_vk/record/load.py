"""Reading a run from anything that holds one: a run directory, a ``log.jsonl``, a ``run.json``
or TensorBoard event files (:func:`load_run`), and finding runs under a folder (:func:`find_runs`).

Reading never executes anything: JSON only, arrays as base64 bytes with a
whitelisted dtype. A ``run.json`` is streamed, its ``"b64"`` strings decoded as
they pass (:func:`_split_payloads`), so a million-step file never sits in memory
twice. A file that cannot be a run at all raises ``RunFileError`` naming the file
and field.
"""

from __future__ import annotations

import base64
import binascii
import ctypes
import json
import os
import sys
from pathlib import Path

import numpy as np

from .log import Payload, RunFileError, decode_array
from .read_log import _Builder, _same_steps, _text, run_from_log
from .run import _EMPTY_F, _EMPTY_I, MAX_RUN_BYTES, RUN_SCHEMA, Run, Series


def run_from_json(path) -> Run:
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_RUN_BYTES:
        raise RunFileError(f"{path}: {size} bytes is more than the {MAX_RUN_BYTES} allowed for a run file")
    try:
        doc = _read_json(path)
    except RecursionError:
        raise RunFileError(f"{path}: nested too deeply to be a run file") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFileError(f"{path}: not JSON ({str(exc)[:100]})") from None
    run = run_from_doc(doc, path)
    if size > 64 << 20:
        del doc  # and with it the columns the run did not keep (step columns equal to another)
        _release_free_heap()
    return run


def _read_json(path: Path):
    split = _split_payloads(path)
    if split is None:  # a "b64" string that is not plain base64: read the file as it is
        return json.loads(path.read_bytes())
    text, payloads, placeholder = split
    doc = json.loads(text, object_hook=lambda d: _take_payload(d, payloads, placeholder))
    if isinstance(doc, dict):
        for key in ("config", "meta", "problems"):  # passed through: give them their text back
            if key in doc:
                doc[key] = _restore_text(doc[key])
    return doc


def _release_free_heap() -> None:
    """Hand freed heap memory back to the system. glibc keeps what a large streamed read freed
    between the arrays it kept (read buffers, decoded bytes: ~110 MB after a million-step
    run.json), and a long-lived viewer would carry it; elsewhere this does nothing."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):
            pass


_B64_KEY = b'"b64"'
_JSON_SPACE = b" \t\n\r"
_READ_CHUNK = 1 << 24


def _split_payloads(path: Path):
    """Read a ``run.json`` decoding every ``"b64"`` string as it streams past.

    Returns ``(text, payloads, placeholder)``: the JSON text with each such string replaced by
    ``placeholder + index``, and the decoded :class:`Payload` objects; or None when some ``"b64"``
    string is not plain canonical base64 (the caller then parses the file as it is, and
    ``decode_array`` names the field). A million-step column is so decoded once from the file's
    bytes, never held as JSON text, a Python ``str`` and its bytes at once (a 245 MB file took
    0.7 GB that way), and the file is never in memory whole.
    """
    placeholder = "\0" + os.urandom(8).hex() + ":"
    escaped = placeholder.replace("\0", "\\u0000").encode()
    text = bytearray()
    payloads: list[Payload] = []
    with open(path, "rb") as f:
        buf, pos = f.read(_READ_CHUNK), 0

        def more() -> int:
            """Read on, keeping ``buf[pos:]``; returns how far offsets moved, or -1 at the end."""
            nonlocal buf, pos
            chunk = f.read(_READ_CHUNK)
            if not chunk:
                return -1
            shift = pos
            buf, pos = buf[pos:] + chunk, 0
            return shift

        while True:
            i = buf.find(_B64_KEY, pos)
            if i < 0:
                keep = max(pos, len(buf) - len(_B64_KEY) + 1)  # a key may straddle the next read
                text += buf[pos:keep]
                pos = keep
                if more() < 0:
                    text += buf[pos:]
                    return bytes(text), payloads, placeholder
                continue
            # the key "b64", optional space, a colon, optional space, then a string's opening quote?
            j, colon = i + len(_B64_KEY), False
            while True:
                if j >= len(buf):
                    shift = more()
                    if shift < 0:
                        break
                    j -= shift
                    continue
                if buf[j] in _JSON_SPACE:
                    j += 1
                elif buf[j] == 0x3A and not colon:  # ':'
                    colon, j = True, j + 1
                else:
                    break
            if not (colon and j < len(buf) and buf[j] == 0x22):  # '"'
                text += buf[pos:j]
                pos = j
                continue
            start = j + 1
            end = buf.find(b'"', start)
            while end < 0:
                shift = more()
                if shift < 0:
                    return None  # an unterminated string: the JSON parser will say so
                start -= shift
                end = buf.find(b'"', start)
            view = memoryview(buf)[start:end]
            try:
                raw = base64.b64decode(view, validate=True)
            except (ValueError, binascii.Error):
                return None
            finally:
                view.release()
            rest = len(raw) % 3  # canonical (no spare bits set), so its text can be given back exactly
            if end - start != 4 * ((len(raw) + 2) // 3) or (
                    rest and base64.b64encode(raw[-rest:]) != buf[end - 4:end]):
                return None
            text += buf[pos:start]
            text += escaped + str(len(payloads)).encode()
            payloads.append(Payload(raw))
            pos = end


def _take_payload(d: dict, payloads: list, placeholder: str) -> dict:
    v = d.get("b64")
    if isinstance(v, str) and v.startswith(placeholder):
        d["b64"] = payloads[int(v[len(placeholder):])]
    return d


def _restore_text(v):
    """``v`` with every :class:`Payload` given back as its base64 text."""
    if isinstance(v, Payload):
        return v.text()
    if isinstance(v, dict):
        return {k: _restore_text(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_restore_text(x) for x in v]
    return v


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
    if schema != RUN_SCHEMA:
        raise RunFileError(f"{name}.schema: {str(schema)[:40]!r} is not {RUN_SCHEMA!r}; this caliper-vk reads "
                           f"{RUN_SCHEMA} files (a newer caliper-vk may read this one)")
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
        run.progress_step = decode_array(progress.get("step", []), f"{name}.progress.step").astype(
            np.int64, copy=False)
        run.progress_time = decode_array(progress.get("time", []), f"{name}.progress.time").astype(
            np.float64, copy=False)
        if progress.get("epoch") is not None:
            run.progress_epoch = decode_array(progress["epoch"], f"{name}.progress.epoch").astype(
                np.float64, copy=False)
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
    step_columns = [run.progress_step]
    for k, m in metrics.items():
        where = f"{name}.metrics[{k!r}]"
        try:
            if not isinstance(m, dict):
                raise RunFileError(f"{where}: expected an object")
            steps = decode_array(m.get("step"), f"{where}.step")
            values = decode_array(m.get("value"), f"{where}.value").astype(np.float64, copy=False)
            if steps.shape != values.shape or steps.ndim != 1:
                raise RunFileError(f"{where}: step and value differ in length")
            if len(steps) and (steps.min() < 0 if steps.dtype.kind in "iub" else (
                    not np.all(np.isfinite(steps)) or steps.min() < 0 or not np.all(steps == np.floor(steps)))):
                raise RunFileError(f"{where}.step: steps must be non-negative integers")
            steps = steps.astype(np.int64, copy=False)
            if len(steps) > 1 and np.any(steps[1:] < steps[:-1]):  # recorded in order: nothing to do
                order = np.argsort(steps, kind="stable")
                steps, values = steps[order], values[order]
            steps = _same_steps(steps, step_columns)
            ph = m.get("placeholder_steps") or []
            if not isinstance(ph, list) or not all(isinstance(x, int) for x in ph):
                raise RunFileError(f"{where}.placeholder_steps: expected a list of steps")
            goal = m.get("goal")
            if goal not in (None, "min", "max"):
                raise RunFileError(f"{where}.goal: expected 'min', 'max' or null")
            finite &= bool(np.all(np.isfinite(values)))
            run.metrics[k] = Series(k, steps, values, np.isin(steps, ph) if ph else np.zeros(len(steps), bool),
                                    _text(m.get("unit"), f"{where}.unit"),
                                    _text(m.get("description"), f"{where}.description"), goal)
        except RunFileError as exc:
            run.problems.append(f"{exc}; metric {k!r} is missing")
    run.finite = doc["finite"] if isinstance(doc.get("finite"), bool) else finite
    for section in ("histograms", "arrays", "confusions"):
        items = doc.get(section) or {}
        if not isinstance(items, dict):
            raise RunFileError(f"{name}.{section}: expected an object of name: [frames]")
        for k, frames in items.items():
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
    for frames in (*run.histograms.values(), *run.arrays.values(), *run.confusions.values()):
        frames.sort(key=lambda f: f.step)
    run.snapshots.sort()
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
