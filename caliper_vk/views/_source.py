"""Where a view input's bytes live, and how the GPU and the twin read them.

A :class:`Source` is one input array of a view (point positions, heatmap
values) in its *stored* dtype. Three kinds:

- a host array given to ``set_data`` (converted to float32 once; uploaded
  when it changes) — ``host staging``;
- a live tensor the renderer cannot import: its bytes are copied as they are
  into a host-visible buffer at every frame — ``host staging`` with a reason;
- a live tensor imported in place (``ImportedBuffer``): the shader reads the
  tensor's own memory — ``zero-copy``.

Shaders decode the stored dtype exactly (``engine/shaders/input.glsl``), and
:meth:`Source.float32` decodes it the same way for the numpy twin.
"""

from __future__ import annotations

import numpy as np

DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2, "int32": 3, "uint8": 4}
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "uint8": 1}


class Source:
    """One input of a view.

    Parameters
    ----------
    array : np.ndarray
        The values in their stored dtype (bfloat16 as its raw uint16 bits). For a
        live CPU tensor this aliases the tensor's memory.
    dtype : str
        One of :data:`DTYPE_CODES`.
    imported : ImportedBuffer, optional
        The GPU buffer over the same memory (zero-copy).
    live : bool
        The memory changes in place between frames (re-read every frame).
    current : bool
        ``array`` holds the values the GPU reads this frame (True but for a GPU tensor
        read in place, whose host array is the copy made when it was attached): only
        then do the array's bytes tell whether the input changed.
    """

    def __init__(self, array: np.ndarray, dtype: str = "float32", imported=None, live: bool = False,
                 current: bool = True):
        if dtype not in DTYPE_CODES:
            raise ValueError(f"unsupported source dtype {dtype!r}")
        self.array = array
        self.dtype = dtype
        self.imported = imported
        self.live = live
        self.current = current
        # the view's device buffer holding these bytes when it stages them (set by the view as it
        # uploads; a live session's history copies the frame's input from it on the device)
        self.staged = None

    @property
    def code(self) -> int:
        return DTYPE_CODES[self.dtype]

    @property
    def shape(self) -> tuple:
        return tuple(self.array.shape)

    @property
    def nbytes(self) -> int:
        return self.array.size * ITEMSIZE[self.dtype]

    def float32(self) -> np.ndarray:
        """The values as float32, decoded exactly as the shaders decode them."""
        a = self.array
        if self.dtype == "bfloat16":
            return (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return a.astype(np.float32, copy=False) if self.dtype == "float32" else a.astype(np.float32)

    def raw(self) -> np.ndarray:
        """The stored bytes (what a staging upload copies)."""
        return self.array.reshape(-1).view(np.uint8)

    def close(self) -> None:
        if self.imported is not None:
            self.imported.close()
            self.imported = None
