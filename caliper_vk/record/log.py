"""The append-only run log: one JSON record per line, each with its own checksum.

A line is ``<json>\\t<crc32 as 8 hex digits>\\n``. ``json.dumps`` escapes every
control character, so the tab can only be the separator. Each record is
written with one ``os.write`` on a file opened ``O_APPEND`` — no Python-side
buffer — so a process killed at any point leaves every earlier record intact
and at most one partial last line, which the reader drops and reports. The
checksum catches a line damaged some other way (a disk error, a hand edit).

Arrays travel as ``{"dtype": ..., "shape": [...], "b64": ...}`` (little-endian
bytes, base64); nothing in a log is ever executed or unpickled.
"""

from __future__ import annotations

import base64
import json
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

LOG_SCHEMA = "caliper-log/1"
ARRAY_DTYPES = ("float64", "float32", "float16", "int64", "int32", "uint8", "bool")
MAX_LINE_BYTES = 256 * 1024 * 1024


class RunFileError(ValueError):
    """A run file (log, run.json, event file) that cannot be read; the message names the file and field."""


def encode_array(a, raw: bool = False) -> dict:
    """``{"dtype", "shape", "b64"}`` (little-endian bytes in base64), or with ``raw`` the bytes
    themselves under ``"raw"`` (for the run file's sidecar)."""
    a = np.ascontiguousarray(a)
    if a.dtype.name not in ARRAY_DTYPES:
        a = a.astype(np.float32 if a.dtype.kind == "f" else np.int64)
    data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    if raw:
        return {"dtype": a.dtype.name, "shape": list(a.shape), "raw": data}
    return {"dtype": a.dtype.name, "shape": list(a.shape), "b64": base64.b64encode(data).decode()}


class Payload:
    """An array's bytes already in memory (a view of a ``run.json``'s memory-mapped sidecar),
    which ``decode_array`` takes in place of base64 text and returns a view of (no copy). The
    view may run past the array: ``decode_array`` takes the declared size from its start."""

    __slots__ = ("data", "decoded", "problem")

    def __init__(self, data: np.ndarray | None, problem: str = ""):
        self.data, self.problem = data, problem  # no data: why (decode_array raises with it)
        self.decoded: dict = {}  # (dtype, shape) -> the array already made from these bytes

    @classmethod
    def view(cls, data: np.ndarray) -> Payload:
        return cls(data)


def decode_array(obj, where: str, max_elements: int = 1 << 28) -> np.ndarray:
    """The array in ``obj`` (encoded form or a plain list of numbers); RunFileError naming ``where``."""
    if isinstance(obj, list):
        try:
            out = np.asarray(obj, dtype=np.float64)
        except (TypeError, ValueError):
            raise RunFileError(f"{where}: expected a list of numbers") from None
        if out.ndim != 1:
            raise RunFileError(f"{where}: expected a flat list of numbers")
        return out
    if not isinstance(obj, dict) or not {"dtype", "shape", "b64"} <= obj.keys():
        raise RunFileError(f"{where}: expected an array object with dtype, shape and b64")
    dtype, shape, data = obj["dtype"], obj["shape"], obj["b64"]
    if dtype not in ARRAY_DTYPES:
        raise RunFileError(f"{where}.dtype: {dtype!r} is not one of {', '.join(ARRAY_DTYPES)}")
    if (not isinstance(shape, list) or len(shape) > 8
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 31 for n in shape)):
        raise RunFileError(f"{where}.shape: expected a list of at most 8 non-negative integers")
    count = math.prod(shape)
    if count > max_elements:
        raise RunFileError(f"{where}.shape: {count} elements is more than the {max_elements} allowed")
    if isinstance(data, Payload):
        if data.data is None:
            raise RunFileError(f"{where}.{data.problem}")
        hit = data.decoded.get((dtype, tuple(shape)))
        if hit is not None:  # the same stored column referenced again: the same array
            return hit
        want = count * np.dtype(dtype).itemsize
        raw = data.data[:want]
        nbytes = raw.nbytes
    elif isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            raise RunFileError(f"{where}.b64: not valid base64") from None
        nbytes = len(raw)
    else:
        raise RunFileError(f"{where}.b64: expected a base64 string")
    dt = np.dtype(dtype).newbyteorder("<")
    if nbytes != count * dt.itemsize:
        raise RunFileError(f"{where}: {nbytes} bytes of data for shape {shape} of {dtype} "
                           f"({count * dt.itemsize} expected)")
    if isinstance(raw, np.ndarray):  # the sidecar's mapping: a view, not a copy
        out = raw.view(dt).astype(np.dtype(dtype), copy=False).reshape(shape)
        data.decoded[(dtype, tuple(shape))] = out
        return out
    return np.frombuffer(raw, dtype=dt).astype(np.dtype(dtype)).reshape(shape)


def _clean(value):
    """JSON-safe copy: non-finite floats become the strings "nan", "inf", "-inf"."""
    kind = type(value)
    if kind is dict:  # (the common case first: a record of finite floats, once per step)
        return {k if type(k) is str else str(k): v if type(v) is float and math.isfinite(v) else _clean(v)
                for k, v in value.items()}
    if kind is float:
        return value if math.isfinite(value) else ("nan" if math.isnan(value) else
                                                    ("inf" if value > 0 else "-inf"))
    if kind is str or kind is int or value is None:
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        return _clean(value.item())
    return value


def number(value, where: str) -> float:
    """A recorded number: int/float, or one of the strings "nan", "inf", "-inf"."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(value)
    raise RunFileError(f"{where}: expected a number, got {type(value).__name__} {str(value)[:40]!r}")


def encode_line(record: dict) -> bytes:
    text = json.dumps(_clean(record), separators=(",", ":"), allow_nan=False)
    crc = zlib.crc32(text.encode()) & 0xFFFFFFFF
    return f"{text}\t{crc:08x}\n".encode()


class LogWriter:
    """Appends records to a log file, one ``os.write`` per record."""

    def __init__(self, path, header: dict):
        self.path = Path(path)
        # O_BINARY (Windows): without it every "\n" is written as "\r\n" and the reader finds no checksum
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL | getattr(os, "O_BINARY", 0)
        self._fd = os.open(self.path, flags, 0o644)
        self.size = 0  # bytes written: the offset of the next record
        self.header = {"t": "header", "schema": LOG_SCHEMA, **header}
        self.write(self.header)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def write(self, record: dict) -> tuple[int, int]:
        """Append ``record``; returns its line's ``(offset, length)`` in the file."""
        if self._fd is None:
            raise RunFileError(f"{self.path}: the log is closed; records after close() are not kept")
        line = encode_line(record)
        view = memoryview(line)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        at = self.size
        self.size += len(line)
        return at, len(line)

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.fsync(fd)
            os.close(fd)


@dataclass
class LogContents:
    header: dict
    records: list[dict]
    problems: list[str] = field(default_factory=list)
    ended_cleanly: bool = False


def parse_line(raw: bytes, where: str) -> tuple[dict | None, str]:
    """``(record, "")`` from one whole log line (with its newline), or ``(None, why)``."""
    text, sep, crc = raw[:-1].rpartition(b"\t")
    if not sep or len(crc) != 8:
        return None, f"{where}: no checksum; skipped"
    try:
        ok = int(crc, 16) == zlib.crc32(text) & 0xFFFFFFFF
    except ValueError:
        ok = False
    if not ok:
        return None, f"{where}: checksum mismatch (the line was damaged); skipped"
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"{where}: not JSON ({str(exc)[:80]}); skipped"
    if not isinstance(record, dict) or not isinstance(record.get("t"), str):
        return None, f"{where}: a record must be an object with a string field 't'; skipped"
    return record, ""


def read_log(path, max_bytes: int = 8 << 30) -> LogContents:
    """Every intact record of a log; damaged or partial lines are skipped and listed in ``problems``."""
    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise RunFileError(f"{path}: {size} bytes is larger than the {max_bytes} bytes allowed")
    problems: list[str] = []
    records: list[dict] = []
    header = None
    with open(path, "rb") as f:
        for number_, raw in enumerate(f, start=1):
            where = f"{path.name} line {number_}"
            if not raw.endswith(b"\n"):
                problems.append(f"{where}: incomplete last record ({len(raw)} bytes, the writer was "
                                f"stopped while writing it); skipped")
                break
            if len(raw) > MAX_LINE_BYTES:
                problems.append(f"{where}: {len(raw)} bytes is over the {MAX_LINE_BYTES} allowed; skipped")
                continue
            record, problem = parse_line(raw, where)
            if record is None:
                problems.append(problem)
                continue
            if header is None:
                if record["t"] != "header":
                    raise RunFileError(f"{where}: the first record must be the header, not {record['t']!r}")
                if record.get("schema") != LOG_SCHEMA:
                    raise RunFileError(f"{where}: schema {record.get('schema')!r} is not {LOG_SCHEMA!r}; "
                                       f"this caliper-vk reads {LOG_SCHEMA} logs (upgrade caliper-vk?)")
                header = record
                continue
            record["_line"] = number_
            records.append(record)
    if header is None:
        if problems:
            raise RunFileError(f"{path}: not a Caliper run log: none of its lines is a valid record "
                               f"({problems[0]}{'; ...' if len(problems) > 1 else ''})")
        raise RunFileError(f"{path}: empty log (no header record)")
    ended = bool(records) and records[-1].get("t") == "end"
    return LogContents(header, records, problems, ended)


def logged_tensor(v, name: str):
    """A one-element tensor as a 0-d float64 tensor on its device (read later, without waiting)."""
    if v.numel() != 1:
        raise ValueError(f"{name}: a logged value must be one number, got a tensor of shape "
                         f"{tuple(v.shape)}; log v.mean() or a histogram instead")
    return v.detach().reshape(()).double()


def logged_value(v, name: str) -> float:
    """A logged number (a Python or numpy number, a one-element array) as a float."""
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise ValueError(f"{name}: a logged value must be one number, got an array of shape {v.shape}")
        v = v.item()
    if isinstance(v, bool | int | float | np.generic):
        return float(v)
    raise TypeError(f"{name}: a logged value must be a number or a one-element tensor, "
                    f"not {type(v).__name__}")
