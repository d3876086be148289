"""The rewind history's copies, recorded once and re-submitted.

Every drawn frame copies each panel's input into the history's ring
(:mod:`.history`), at a place that moves on by one frame each time. A
``vkCmdCopyBuffer`` names its destination offset in the command buffer, so
those copies would have to be recorded anew every frame: a reset, a begin, a
copy per input and an end, tens of microseconds of the training thread's time
on a CPU device. Instead :class:`RingCopies` records, once per layout of the
panels and per ring chunk, one small compute dispatch per input
(``engine/shaders/ring_copy.comp``) whose destination word is read from a
host-visible buffer; per frame the host writes that one word and picks the
chunk's command buffer. The copies are words: an input is copied this way when
its buffer offset is a multiple of 4 and its last word lies inside its buffer
(the ring's places are 16-byte aligned, so the rounding never reaches the next
input), and every buffer fits one storage descriptor; otherwise
:meth:`RingCopies.usable` says so and the history records ``vkCmdCopyBuffer``s
per frame as before.

Large frames take transfers instead, recorded once per place. A compute copy
costs the device far more than a transfer of the same bytes where the device is
a CPU (lavapipe runs a word copy as gathered loads and scattered stores, lane by
lane: 12 MB of a 1M-point cloud took longer than the cloud's own splat, where a
``vkCmdCopyBuffer`` is one ``memcpy``); on a GPU both are cheap. A chunk holds
``chunk_size // frame bytes`` frames at fixed places (0, total, 2 total, ...), so
when it holds at most :data:`TRANSFER_PLACES` of them (frames of 1/256 of the
budget or more) :class:`RingCopies` records a ``vkCmdCopyBuffer`` command buffer
per chunk and place at its first use (at most 16 x TRANSFER_PLACES) and re-submits
it, with no host write per frame: the host does no work that grows with the data,
and the device copies at memory speed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine import Buffer, ComputePipeline, shaders
from ..engine.commands import Recorder

ALIGN = 16  # each kept input starts on a 16-byte boundary of its frame
_BINDINGS = ("buffer",) * 4
_LOCAL = 256
_MAX_GROUPS = 65535
# A chunk that holds at most this many frames copies them by transfers recorded per place.
TRANSFER_PLACES = 16


@dataclass(frozen=True)
class Kept:
    """One input of a kept frame: where its bytes are in the frame and what they were (shared
    by every frame of one layout of the panels)."""

    panel: str
    index: int  # the input's place in panel.inputs
    view: str
    dtype: str  # the stored dtype (contract name)
    np_dtype: str  # the numpy dtype of the stored bytes (bfloat16: uint16)
    shape: tuple
    offset: int  # from the frame's start in its chunk
    nbytes: int


@dataclass
class Layout:
    """What one frame keeps while the panels and their inputs stay the same: the inputs' places
    (made once, not per frame), the staged ones and the frame's bytes."""

    key: list
    inputs: tuple  # of Kept
    sources: tuple  # the Source of each kept input
    staged: tuple  # (Kept, Source) of the inputs the renderer stages (copied from Source.staged)
    total: int


def layout_key(panels) -> list:
    """Equal (``==``) while the panels, their sources, imports, dtypes and shapes are: the layout
    stays valid. A list of the objects themselves: compared by identity, made without tuples."""
    key = []
    for panel in panels:
        key += (panel, panel.name)
        for _, s in panel.inputs:
            key += (s, s.imported, s.dtype, s.array.shape)
    return key


def make_layout(key: list, panels) -> Layout:
    inputs, sources, staged, total = [], [], [], 0
    for panel in panels:
        for i, (_, source) in enumerate(panel.inputs):
            n = source.nbytes
            if not n:
                continue
            kept = Kept(panel.name, i, type(panel.view).__name__.lower(), source.dtype,
                        source.array.dtype.str, tuple(source.array.shape), total, n)
            inputs.append(kept)
            sources.append(source)
            if source.imported is None:
                staged.append((kept, source))
            total += -(-n // ALIGN) * ALIGN
    return Layout(key, tuple(inputs), tuple(sources), tuple(staged), total)


def _pipeline(device) -> ComputePipeline:
    p = device.cache.get(("pipeline", "ring_copy"))
    if p is None or p.handle is None:
        p = ComputePipeline(device, shaders.load("ring_copy"), _BINDINGS, name="ring_copy")
        device.cache[("pipeline", "ring_copy")] = p
    return p


def _groups(words: int) -> tuple[int, int]:
    total = max(1, -(-words // _LOCAL))
    return (total, 1) if total <= _MAX_GROUPS else (_MAX_GROUPS, -(-total // _MAX_GROUPS))


class RingCopies:
    """The copies of one layout (``[(source buffer, byte offset, nbytes, offset in the frame)]``),
    recorded per ring chunk (word copies) or per chunk and place (``transfers``). States:
    live → closed.

    Parameters
    ----------
    device : engine Device
        Borrowed.
    copies : list of (Buffer, int, int, int)
        Each kept input: the buffer the view reads (the imported tensor, or the view's staging
        buffer), its byte offset there, its bytes, and its byte offset from the frame's start.
    transfers : bool
        Record ``vkCmdCopyBuffer``s per chunk and place (any offsets; for chunks that hold few
        frames, see the module docstring) instead of one word-copy dispatch per chunk.
    """

    def __init__(self, device, copies, transfers: bool = False):
        self.device = device
        self.copies = list(copies)
        self.transfers = bool(transfers)
        self._base = self._base_word = None  # word copies: the frame's first word in its chunk
        self._args = []
        if not self.transfers:
            self._base = Buffer(device, 16)
            self._base_word = self._base.view(np.uint32, 1)
            for _, offset, nbytes, at in self.copies:
                args = Buffer(device, 16)
                args.write(np.array([offset // 4, at // 4, -(-nbytes // 4), 0], np.uint32))
                self._args.append(args)
        # chunk index -> (its buffer, {place: Recorder}, sets); the word copies' one Recorder
        # is at place None
        self._chunks: dict[int, tuple] = {}

    @staticmethod
    def usable(device, copies, chunk_size: int) -> bool:
        """True when every copy can run as a word copy (see the module docstring)."""
        most = device.info.limits["maxStorageBufferRange"]
        if chunk_size > most:
            return False
        for buf, offset, nbytes, _ in copies:
            if offset % 4 or offset + -(-nbytes // 4) * 4 > buf.size or buf.size > most:
                return False
        return True

    def commands(self, chunk: int, dst: Buffer, base: int):
        """The command buffer that copies this frame's inputs to byte ``base`` of chunk ``dst``
        (recorded at the chunk's, or the place's, first use); call only when no earlier frame is
        in flight."""
        held = self._chunks.get(chunk)
        if held is None or held[0] is not dst:
            if held is not None:
                self._drop(held)
            held = self._chunks[chunk] = (dst, {}, [])
        place = base if self.transfers else None
        rec = held[1].get(place)
        if rec is None:
            rec = held[1][place] = self._record(dst, base, held[2])
        if not self.transfers:
            self._base_word[0] = base // 4
        return rec.handle

    def _record(self, dst: Buffer, base: int, sets: list) -> Recorder:
        rec = Recorder(self.device)
        rec.begin()
        if self.transfers:
            for src, offset, nbytes, at in self.copies:
                rec.copy_buffer(src, dst, nbytes, offset, base + at)
        else:
            pipeline = _pipeline(self.device)
            for (buf, _, nbytes, _), args in zip(self.copies, self._args, strict=True):
                s = pipeline.bind([self._base, args, buf, dst])
                sets.append(s)
                rec.dispatch(s, *_groups(-(-nbytes // 4)))
        rec.end()
        return rec

    @staticmethod
    def _drop(held: tuple) -> None:
        _, recs, sets = held
        for rec in recs.values():
            rec.close()  # freed once the frames that ran it are done (deferred release)
        for s in sets:
            s.close()

    def close(self) -> None:
        for held in self._chunks.values():
            self._drop(held)
        self._chunks.clear()
        for b in (self._base, *self._args):
            if b is not None:
                b.close()
        self._args = []
