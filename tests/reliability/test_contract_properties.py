"""Property tests: the contract checks accept exactly the contiguous tensors of supported dtypes."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
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
