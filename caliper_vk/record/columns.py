"""The run's scalar columns, written as the run goes, so that ``Recorder.close()`` only copies them.

``run.json`` stores every series as two columns (steps, values) in its sidecar.
Building those at the end from the log means parsing every record the run ever
wrote (200k steps × 50 series: 17.5 s and +303 MB at ``close()``). Instead the
recorder hands each record it writes to a :class:`ColumnSpool`:

- a ``scalars`` record appends its values to their series' value columns, its
  step to their step column, and its step, epoch and time to the progress
  columns. Series logged together (the same records, the same steps) share one
  step column (a *stream*): a series follows a stream while its steps are the
  stream's; one that skips or adds a step gets a stream of its own (a copy of
  the prefix it shared, once);
- every column keeps its newest :data:`CHUNK` values in memory and appends
  each full chunk to one spool file beside the log (``.columns.spool``), so
  memory stays flat however long the run is;
- any other record (definitions, histograms, arrays, confusions, snapshots,
  epochs, the end) is remembered by its place in the log (offset and length):
  ``close()`` reads those lines back, and only those, through the same checks
  as :func:`~caliper_vk.record.builder.run_from_log`.

``close()`` then writes the sidecar by copying each column's chunks from the
spool (``os.pread``, a chunk at a time) and its in-memory tail: a few calls per
column, whatever the run's length. A column whose steps went backwards (a value
logged for an earlier step) is read whole and sorted, as the log's reader
sorts it. The log stays the record of truth: a run killed before ``close()``
opens from it (``load_run`` reads the log when there is no ``run.json``), and
the spool it leaves is ignored (the next ``Recorder(..., overwrite=True)``
removes it).
"""

from __future__ import annotations

import array
import math
import os
import sys
from pathlib import Path

import numpy as np

from . import pyramid

SPOOL_NAME = ".columns.spool"
CHUNK = 4096  # values a column keeps in memory before appending them to the spool (32 kB)


class _Column:
    """One growing column of int64 (``"q"``) or float64 (``"d"``) values."""

    __slots__ = ("chunks", "code", "increasing", "n", "spool", "tail")

    def __init__(self, spool: ColumnSpool, code: str):
        self.spool, self.code = spool, code
        self.tail = array.array(code)
        self.chunks = array.array("q")  # spool offsets of full chunks of CHUNK values
        self.n = 0
        self.increasing = True  # never decreased (steps: no sort needed)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int64 if self.code == "q" else np.float64)

    def append(self, v) -> None:
        if self.n and self.increasing and v < self.last:
            self.increasing = False
        self.tail.append(v)
        self.n += 1
        if len(self.tail) >= CHUNK:
            self.chunks.append(self.spool.put(self.tail))
            self.tail = array.array(self.code)

    def push(self, v) -> None:
        """``append`` without the order check (values, not steps)."""
        tail = self.tail
        tail.append(v)
        if len(tail) >= CHUNK:
            self.chunks.append(self.spool.put(tail))
            self.tail = array.array(self.code)
        self.n += 1

    @property
    def last(self):
        return self.tail[-1] if self.tail else self.read(self.n - 1, self.n)[0]

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Values ``lo`` to ``hi`` (from the spool and the tail)."""
        out = np.empty(max(hi - lo, 0), self.dtype)
        spilled = len(self.chunks) * CHUNK
        at = lo
        while at < min(hi, spilled):
            c, i = divmod(at, CHUNK)
            take = min(CHUNK - i, hi - at)
            out[at - lo:at - lo + take] = self.spool.get(self.chunks[c] + i * 8, take, self.dtype)
            at += take
        if at < hi:
            out[at - lo:] = np.frombuffer(self.tail, self.dtype)[at - spilled:hi - spilled]
        return out

    def pieces(self, count: int | None = None) -> list:
        """The first ``count`` values (default all) as sidecar pieces: (fd, offset, bytes) of the
        spool, then the tail's bytes."""
        count = self.n if count is None else count
        out, left = [], count
        for off in self.chunks:
            if left <= 0:
                break
            take = min(CHUNK, left)
            out.append((self.spool.fd, off, take * 8))
            left -= take
        if left > 0:
            out.append(_le(np.frombuffer(self.tail, self.dtype)[:left]).tobytes())
        return out


def _le(a: np.ndarray) -> np.ndarray:
    return a if sys.byteorder == "little" else a.byteswap()


class _Series:
    __slots__ = ("n", "placeholders", "stream", "values")

    def __init__(self, spool):
        self.values = _Column(spool, "d")
        self.stream: _Stream | None = None
        self.n = 0
        self.placeholders: list[int] = []


class _Stream:
    __slots__ = ("born", "like_progress", "steps")

    def __init__(self, spool, born: int):
        self.steps = _Column(spool, "q")
        self.born = born  # the record that made it (series first logged together join it)
        # every step so far is the progress table's step at the same index: when the lengths
        # match at close, the series store the progress step column itself (the loader then
        # shares it by reference instead of comparing ten million steps)
        self.like_progress = born >= 0


class ColumnSpool:
    """Scalar series and the progress table of one run, as columns (see the module docstring)."""

    def __init__(self, directory):
        self.path = Path(directory) / SPOOL_NAME
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self.series: dict[str, _Series] = {}
        self.progress = (_Column(self, "q"), _Column(self, "d"), _Column(self, "d"))  # step, epoch, time
        self.pending: list | None = None  # the newest progress entry [step, epoch, time] (merged)
        self.disordered = False  # a progress step came back: the table is rebuilt at close
        self.epochs = False  # any entry had an epoch
        self.others = array.array("q")  # (offset, length) of every other record in the log
        self._records = 0
        self._group = None  # (keys, stream, series) of the last record whose series all share a stream

    # -- the spool file --------------------------------------------------------------
    def put(self, values: array.array) -> int:
        data = _le(np.frombuffer(values, np.int64 if values.typecode == "q" else np.float64)).tobytes()
        at = self.size
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, at + len(data) - len(view))
            view = view[n:]
        self.size += len(data)
        return at

    def _spooled(self, a: np.ndarray, sidecar) -> dict:
        """``a`` (float64) appended to the spool and added to ``sidecar`` as a piece of it: a
        pyramid's levels wait in the file, not in memory, until the sidecar is written."""
        at = self.put(array.array("d", np.ascontiguousarray(a, np.float64).ravel().tobytes()))
        return sidecar.add_pieces(np.float64, a.size, [(self.fd, at, a.size * 8)], shape=a.shape)

    def get(self, offset: int, count: int, dtype) -> np.ndarray:
        data = os.pread(self.fd, count * 8, offset)
        return np.frombuffer(data, np.dtype(dtype).newbyteorder("<")).astype(dtype)

    def close(self, remove: bool = True) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            if remove:
                self.path.unlink(missing_ok=True)

    # -- records -----------------------------------------------------------------------
    def add(self, record: dict, offset: int, length: int) -> None:
        """A record just written to the log at ``offset`` (``length`` bytes)."""
        t = record["t"]
        if t != "scalars":
            self.others.extend((offset, length))
            if t in ("hist", "array", "confusion"):  # steps of the run's progress, as the builder's
                self._note(record["step"], record.get("epoch"), None)
            return
        self._records += 1
        step = record["step"]
        self._note(step, record.get("epoch"), record.get("time"))
        values = record["values"]
        placeholder = record.get("placeholder") or ()
        g = self._group
        if g is not None and not placeholder and g[0] == tuple(values):
            st, group = g[1], g[2]
            if all(s.n == st.steps.n for s in group):  # the usual record: the same series, in step
                self._grow(st, step)
                for s, v in zip(group, values.values(), strict=True):
                    s.values.push(v)
                    s.n += 1
                return
        group = []
        for k, v in values.items():
            s = self.series.get(k)
            if s is None:
                s = self.series[k] = _Series(self)
            self._follow(s, step)
            s.values.push(float(v))
            if k in placeholder:
                s.placeholders.append(step)
            s.n += 1
            group.append(s)
        st = group[0].stream if group else None
        lockstep = st is not None and all(s.stream is st and s.n == st.steps.n for s in group)
        self._group = (tuple(values), st, group) if lockstep else None

    def _note(self, step: int, epoch, time_) -> None:
        if epoch is not None:
            self.epochs = True
        p = self.pending
        if p is not None and p[0] == step:  # the builder's merge: a newer known value wins
            p[1] = epoch if epoch is not None else p[1]
            p[2] = time_ if time_ is not None else p[2]
            return
        if p is not None:
            if step < p[0]:
                self.disordered = True
            for col, v in zip(self.progress, p, strict=True):
                col.append(math.nan if v is None else v)
        self.pending = [step, epoch, time_]

    def _follow(self, s: _Series, step: int) -> None:
        st = s.stream
        if st is None:
            st = next((x for x in self._streams() if x.born == self._records and x.steps.n == 1
                       and x.steps.last == step), None)
            if st is None:
                st = _Stream(self, self._records)
                self._grow(st, step)
            s.stream = st
            return
        if st.steps.n == s.n:  # it leads: the stream grows
            self._grow(st, step)
        elif not (st.steps.n == s.n + 1 and st.steps.last == step):  # it left the stream
            own = _Stream(self, -1)
            for lo in range(0, s.n, CHUNK):
                for v in st.steps.read(lo, min(lo + CHUNK, s.n)).tolist():
                    own.steps.append(v)
            own.steps.append(step)
            s.stream = own

    def _grow(self, st: _Stream, step: int) -> None:
        """Append ``step`` to stream ``st`` (just noted in the progress table: it is the pending
        entry, whose index is the number of entries flushed)."""
        if st.like_progress:
            p = self.pending
            st.like_progress = p is not None and p[0] == step and st.steps.n == self.progress[0].n
        st.steps.append(step)

    def _streams(self):
        seen = set()
        for s in self.series.values():
            if s.stream is not None and id(s.stream) not in seen:
                seen.add(id(s.stream))
                yield s.stream

    # -- the run file --------------------------------------------------------------------
    def other_records(self, log_path):
        """``(line text, offset)`` of every non-scalar record, read back from the log."""
        with open(log_path, "rb") as f:
            fd = f.fileno()
            for i in range(0, len(self.others), 2):
                off, n = self.others[i], self.others[i + 1]
                yield os.pread(fd, n, off), off

    def write_columns(self, doc: dict, sidecar, defs: dict) -> None:
        """Fill ``doc["progress"]`` and ``doc["metrics"]`` with references to the columns, through
        ``sidecar`` (a :class:`~caliper_vk.record.runfile._SidecarWriter`)."""
        progress_steps, epochs, times = self._progress(sidecar)
        doc["progress"] = {"step": progress_steps, "epoch": epochs if self.epochs else None, "time": times}
        entries = 0 if self.pending is None or self.disordered else self.progress[0].n + 1
        metrics = {}
        refs: dict = {}
        for name, s in self.series.items():
            d = defs.get(name, {})
            st = s.stream.steps
            if st.increasing or (s.n < st.n and _increasing(st.read(0, s.n))):
                key = (id(st), s.n)
                if key not in refs:  # series sharing a stream share its stored column
                    refs[key] = (progress_steps if s.stream.like_progress and s.n == entries
                                 else sidecar.add_pieces(st.dtype, s.n, st.pieces(s.n)))
                step_ref = dict(refs[key])
                value_ref = sidecar.add_pieces(s.values.dtype, s.n, s.values.pieces())
                pyr = self._pyramid(s, st, sidecar) if s.n >= pyramid.MIN_LENGTH else None
            else:  # values logged for earlier steps: sorted as the log's reader sorts them
                order = np.argsort(st.read(0, s.n), kind="stable")
                steps, values = st.read(0, s.n)[order], s.values.read(0, s.n)[order]
                step_ref, value_ref = sidecar.add(steps), sidecar.add(values)
                pyr = pyramid.of_array(values, np.isin(steps, s.placeholders) if s.placeholders else None) \
                    if s.n >= pyramid.MIN_LENGTH else None
            metrics[name] = {"unit": d.get("unit"), "description": d.get("description"), "goal": d.get("goal"),
                             "step": step_ref, "value": value_ref,
                             "placeholder_steps": sorted(set(s.placeholders))}
            if isinstance(pyr, dict):
                metrics[name]["pyramid"] = pyr
            elif pyr is not None:  # the dashboard draws a long series from it (record/pyramid.py)
                metrics[name]["pyramid"] = pyramid.to_doc(pyr, lambda a: self._spooled(a, sidecar))
        doc["metrics"] = metrics

    def _pyramid(self, s: _Series, steps: _Column, sidecar) -> dict:
        """A series' min/max pyramid as ``run.json`` stores it, read back from its spooled columns
        (values, and its ``steps`` where it has placeholders) a piece at a time; level 1 (``n``
        bytes) goes to the spool as it is made, so only level 2 and up are ever in memory."""
        ph = np.array(sorted(set(s.placeholders)), np.int64)
        start, size = self.size, [0]

        def spill(rows):
            self.put(array.array("d", np.ascontiguousarray(rows, np.float64).tobytes()))
            size[0] += rows.nbytes

        def pieces():
            for lo in range(0, s.n, pyramid.SCAN):
                hi = min(lo + pyramid.SCAN, s.n)
                yield s.values.read(lo, hi), np.isin(steps.read(lo, hi), ph) if len(ph) else None

        pyr = pyramid.build(pieces(), s.n, spill)
        rows = pyramid.level_rows(s.n)[0]  # (written end to end: nothing else writes the spool meanwhile)
        first = sidecar.add_pieces(np.float64, rows * 2, [(self.fd, start, size[0])], shape=(rows, 2))
        return pyramid.to_doc(pyr, lambda a: self._spooled(a, sidecar), first)

    def _progress(self, sidecar):
        cols = self.progress
        if self.pending is None:
            return (sidecar.add(np.zeros(0, np.int64)), sidecar.add(np.zeros(0)), sidecar.add(np.zeros(0)))
        last = [self.pending[0], *(math.nan if v is None else v for v in self.pending[1:])]
        if not self.disordered:
            n = cols[0].n + 1
            return tuple(sidecar.add_pieces(c.dtype, n, [*c.pieces(), _le(np.array([v], c.dtype)).tobytes()])
                         for c, v in zip(cols, last, strict=True))
        table: dict = {}  # steps came back: the builder's merge, in order, over the whole table
        for lo in range(0, cols[0].n, CHUNK):
            hi = min(lo + CHUNK, cols[0].n)
            for step, e, t in zip(*(c.read(lo, hi).tolist() for c in cols), strict=True):
                _merge(table, step, e, t)
        _merge(table, *last)
        steps = sorted(table)
        return (sidecar.add(np.array(steps, np.int64)),
                sidecar.add(np.array([table[s][0] for s in steps], np.float64)),
                sidecar.add(np.array([table[s][1] for s in steps], np.float64)))


def _merge(table: dict, step: int, epoch: float, time_: float) -> None:
    old = table.get(step, (math.nan, math.nan))
    table[step] = (old[0] if math.isnan(epoch) else epoch, old[1] if math.isnan(time_) else time_)


def _increasing(a: np.ndarray) -> bool:
    return len(a) < 2 or bool(np.all(a[1:] >= a[:-1]))
