"""Values written where the GPU reads them, after the view's first frame, with the view's host
copy left as it was (the semantics of a GPU tensor read in place: its host array is a snapshot
taken at attach). The twin is made afterwards from a copy of what was written, as a test on a
real GPU makes it from a ``.cpu()`` copy after ``flush()``."""

import numpy as np

from caliper_vk.engine import Canvas


def render_written_after_first_frame(view, first, later, width, height, twin_factory):
    """Draw ``view`` (made over ``first``), write ``later`` into the buffer its passes read
    (same dtype and size), draw again; return (image, twin image, twin view)."""
    with Canvas(width, height) as canvas:
        canvas.add(view)
        canvas.render()
        written = np.ascontiguousarray(later, dtype=first.dtype).reshape(-1)
        assert written.nbytes == view.source.nbytes
        view._bound["data"].write(written.view(np.uint8))  # the device memory; the host copy stays
        assert not np.array_equal(view.source.array.reshape(-1), written)
        image = canvas.render()
    twin = twin_factory(np.array(later, copy=True))
    with Canvas(width, height) as canvas:
        canvas.add(twin)
        expected = canvas.reference()
    return image, expected, twin
