"""Property tests: the contract checks accept exactly the contiguous tensors of supported dtypes."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from caliper_vk import exporters
from caliper_vk.exporters import ContractError, NotContiguousError, UnsupportedDtypeError

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint8, torch.float64,
          torch.int64, torch.int16, torch.int8, torch.bool, torch.complex64]
SUPPORTED = {torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint8}


@st.composite
def strided_tensors(draw):
    ndim = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim))
    strides = draw(st.lists(st.integers(0, 40), min_size=ndim, max_size=ndim))
    dtype = draw(st.sampled_from(DTYPES))
    offset = draw(st.integers(0, 7))
    span = offset + sum((s - 1) * d for s, d in zip(shape, strides, strict=True) if s > 0) + 1
    base = torch.zeros(max(span, 1), dtype=dtype)
    return torch.as_strided(base, shape, strides, offset)


@settings(max_examples=300, deadline=None)
@given(strided_tensors())
def test_accepts_exactly_contiguous_supported_tensors(t):
    ok_dtype = t.dtype in SUPPORTED
    try:
        exporters.check_tensor(t, "t")
    except UnsupportedDtypeError as exc:
        assert not ok_dtype
        assert "Caliper reads float32, float16, bfloat16, int32, uint8" in str(exc)
    except NotContiguousError as exc:
        assert ok_dtype and not t.is_contiguous()
        assert ".contiguous()" in str(exc) and str(tuple(t.stride())) in str(exc)
    else:
        assert ok_dtype and t.is_contiguous()


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 64), st.integers(1, 64), st.sampled_from(sorted(SUPPORTED, key=str)))
def test_views_with_offset_export_their_own_first_byte(start, length, dtype):
    base = torch.zeros(200, dtype=dtype)
    view = base[start:start + length]
    from caliper_vk.engine import default_device

    record = exporters.export(view, default_device().info, "v")
    assert record.nbytes == view.numel() * view.element_size()
    if record.kind == "host-pointer":
        assert record.handle == view.data_ptr()
        assert record.handle - base.data_ptr() == start * base.element_size()


def test_not_a_tensor_is_refused():
    with pytest.raises(ContractError, match="not a torch tensor"):
        exporters.check_tensor(np.zeros(3), "a")


# -- the whole attach, not only the check: refused exactly as check_tensor says, else drawn exactly ----
@st.composite
def valued_strided_tensors(draw):
    """Random values under random shapes, strides, storage offsets and dtypes, and a view that
    takes the shape (histogram: any; heatmap: 1-D or 2-D; pointcloud: (N, 2|3))."""
    t = draw(strided_tensors())
    seed = draw(st.integers(0, 2**16))
    base = torch.as_strided(t, (t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)
    values = torch.randint(-60, 60, (base.numel(),), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        base.copy_(values.to(t.dtype))
    views = ["histogram"]
    if t.dim() in (1, 2):
        views.append("heatmap")
    if t.dim() == 2 and t.shape[1] in (2, 3):
        views.append("pointcloud")
    return t, draw(st.sampled_from(views))


@pytest.fixture(scope="module")
def session():
    import caliper_vk as cv

    with cv.Session(window=False, size=(64, 48)) as s:
        yield s


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valued_strided_tensors())
def test_attach_refuses_exactly_what_check_tensor_refuses_and_draws_the_rest_exactly(session, tv):
    t, view = tv
    try:
        exporters.check_tensor(t, "t")
        expected = None
    except ContractError as exc:
        expected = type(exc)
    event(f"{view}: {'refused' if expected else 'drawn'}")
    if expected is not None:
        with pytest.raises(expected):
            session.attach(t, view, name="t")
        assert session.panels == []
        return
    panel = session.attach(t, view, name="t")
    try:
        frame = session.render()
        assert np.array_equal(frame, session.canvas.reference())
        r = panel.view.rect
        own = frame[r.y:r.y + r.height, r.x:r.x + r.width]
        panel.close()
        panel = session.attach(t.clone(), view, name="t")  # its own elements, not the base storage's
        frame = session.render()
        assert np.array_equal(own, frame[r.y:r.y + r.height, r.x:r.x + r.width])
    finally:
        panel.close()
