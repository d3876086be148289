"""attach() under bad input: a named matrix of cases through the public API, each with the
behaviour docs/contract.md documents for it.

A refused case must raise the documented error class with a message naming the problem and the
fix, and the fix it names must work: attaching the tensor the message suggests draws. An accepted
case must draw exactly (GPU pixels equal to the numpy twin's) and a contiguous view with a storage
offset must draw its own elements: the same pixels as an attached ``view.clone()``, never the base
storage. After every case the session still draws a valid panel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.exporters import ContractError, NotContiguousError, TooLargeError, UnsupportedDtypeError
from caliper_vk.views import UnknownViewError
from images import assert_same_image

SIZE = (96, 72)
SUPPORTED = "Caliper reads float32, float16, bfloat16, int32, uint8"
G = torch.Generator().manual_seed(7)


def randn(*shape, dtype=torch.float32):
    return (torch.randn(*shape, generator=G) * 20).to(dtype)


def max_range() -> int:
    from caliper_vk.engine import default_device

    return default_device().info.max_storage_buffer_range


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[], object]
    view: str = "heatmap"
    options: dict = field(default_factory=dict)
    error: type | None = None  # refused with this class; None: accepted and drawn exactly
    says: str = ""  # a regex the message must match: the problem and the fix, by name
    fix: Callable | None = None  # what the message tells the caller to attach instead
    check: Callable | None = None  # more checks on an accepted panel: check(panel, tensor)
    clone: bool = True  # an accepted case draws what an attached clone draws
    render: bool = True


def stats(**want):
    def check(panel, t):
        for k, v in want.items():
            assert panel.view.stats[k] == v, (k, panel.view.stats)
    return check


def own_range(panel, t):
    """The heatmap's stats pass saw exactly the view's own extremes (not the base storage's)."""
    v = t.float()
    assert panel.view.seen_range == (float(v.min()), float(v.max()))


def zero_copy(panel, t):
    assert panel.path == "zero-copy", panel.status


def empty_panel(panel, t):
    assert panel.path == "host staging" and "the tensor is empty" in panel.reason


def nan_inf_points(panel, t):
    assert panel.view.stats["nonfinite"] == 3 and panel.view.stats["drawn"] + 3 + \
        panel.view.stats["offscreen"] == len(t)


def with_nan_inf_rows(n=40):
    t = randn(n, 3)
    t[3, 0], t[10, 1], t[20, 2] = float("nan"), float("inf"), float("-inf")
    return t


def with_nan_inf_cells():
    t = randn(12, 16)
    t[0, 0] = t[5, 5] = float("nan")
    t[1, 1] = float("inf")
    t[2, 2] = t[3, 3] = t[4, 4] = float("-inf")
    return t


def grad_leaf():
    return randn(40, 3).requires_grad_()


def grad_nonleaf():
    w = randn(40, 3).requires_grad_()
    return w * 2 + 1


def still_trains(panel, t):
    """The renderer takes no part in autograd: gradients flow, and in-place updates under
    no_grad (what an optimizer does) are drawn."""
    leaf = t if t.is_leaf else None
    (t * t).sum().backward() if leaf is not None else t.sum().backward()
    if leaf is not None:
        assert leaf.grad is not None and torch.equal(leaf.grad, 2 * leaf.detach())
        before = panel.session.render()
        with torch.no_grad(), panel.writing():
            leaf.mul_(-1.0)
        after = panel.session.render()
        assert not np.array_equal(before, after)
        assert np.array_equal(after, panel.session.canvas.reference())


def inference_tensor():
    with torch.inference_mode():
        return randn(40, 3)


def offset_rows(base_rows=128, start=32, stop=None, dtype=torch.float32, shared=False):
    def make():
        base = cv.empty((base_rows, 3), dtype) if shared else torch.empty(base_rows, 3, dtype=dtype)
        base.copy_(randn(base_rows, 3))
        base[:start] = 1e6  # the base storage before the view: far away, would change the fit
        part = base[start:stop]
        assert part.storage_offset() > 0 and part.is_contiguous()
        return part
    return make


def offset_flat(start, stop, dtype, base_len=256):
    def make():
        base = (torch.arange(base_len) % 97).to(dtype)
        base[:start] = 250  # outside the view's values: the range would show a base read
        part = base[start:stop]
        assert part.storage_offset() == start and part.is_contiguous()
        return part
    return make


def offset_grid():
    base = torch.arange(64 * 16, dtype=torch.float32).reshape(64, 16)
    return base[32:]


def odd_strides_size1():
    base = randn(2000)
    t = torch.as_strided(base, (1, 40), (999, 1), 17)  # size-1 dim with a strange stride
    assert t.is_contiguous()
    return t


def nested():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([randn(2, 3), randn(3, 3)])


def quantized():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(randn(8, 3), 0.5, 0, torch.qint8)


def sparse_csr():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return randn(8, 6).relu().to_sparse_csr()


VIEW_FIX = r"not contiguous .*attach x\.contiguous\(\) \(an explicit copy"


def contiguity(id, make, view="heatmap"):
    return Case(id, make, view, error=NotContiguousError, says=VIEW_FIX, fix=lambda t: t.contiguous())


def dtype_case(dtype_name, fix_text, fix, view="pointcloud"):
    dtype = getattr(torch, dtype_name)
    return Case(f"dtype-{dtype_name}", lambda: torch.ones(8, 3).to(dtype), view, error=UnsupportedDtypeError,
                says=f"has dtype {dtype_name}; {SUPPORTED}.*e\\.g\\. x{re.escape(fix_text)}", fix=fix)


CASES = [
    # -- non-contiguous views: refused, never repaired; the fix is the caller's explicit copy
    contiguity("transpose", lambda: randn(3, 40).T, "pointcloud"),
    contiguity("mT", lambda: randn(12, 16).mT),
    contiguity("permute", lambda: randn(2, 3, 4).permute(2, 0, 1), "histogram"),
    contiguity("strided-slice-rows", lambda: randn(80, 3)[::2], "pointcloud"),
    contiguity("strided-slice-inner", lambda: randn(40, 6)[:, ::2], "pointcloud"),
    contiguity("expand", lambda: randn(1, 3).expand(40, 3), "pointcloud"),
    contiguity("expand-scalar", lambda: torch.tensor(2.0).expand(12, 16)),
    contiguity("channels-last", lambda: randn(2, 3, 4, 4).to(memory_format=torch.channels_last), "histogram"),
    contiguity("narrow-inner", lambda: randn(40, 5).narrow(1, 1, 3), "pointcloud"),
    contiguity("as-strided-overlapping", lambda: torch.as_strided(randn(300), (40, 3), (1, 1)), "pointcloud"),
    contiguity("as-strided-gaps", lambda: torch.as_strided(randn(300), (40, 3), (5, 1)), "pointcloud"),
    contiguity("unfold-windows", lambda: randn(50).unfold(0, 3, 1), "pointcloud"),
    contiguity("diagonal", lambda: randn(16, 16).diagonal()),
    contiguity("column", lambda: randn(12, 16)[:, 3]),
    # -- contiguous views with a storage offset: drawn from their own first element
    Case("offset-rows-pointcloud", offset_rows(start=32), "pointcloud", check=zero_copy),
    Case("offset-middle-pointcloud", offset_rows(start=5, stop=105), "pointcloud", check=zero_copy),
    Case("offset-rows-empty()-pointcloud", offset_rows(start=32, shared=True), "pointcloud", check=zero_copy),
    Case("offset-rows-float16-pointcloud", offset_rows(start=7, stop=99, dtype=torch.float16), "pointcloud"),
    Case("offset-grid-heatmap", offset_grid, check=own_range),
    Case("offset-flat-float32-heatmap", offset_flat(5, 105, torch.float32), check=own_range),
    Case("offset-odd-byte-uint8-heatmap", offset_flat(5, 105, torch.uint8), check=own_range),
    Case("offset-2-byte-float16-heatmap", offset_flat(3, 103, torch.float16), check=own_range),
    Case("offset-2-byte-bfloat16-heatmap", offset_flat(1, 101, torch.bfloat16), check=own_range),
    Case("offset-int32-histogram", offset_flat(7, 200, torch.int32), "histogram"),
    Case("size-1-dim-odd-stride", odd_strides_size1, check=zero_copy),
    # -- dtypes outside the whitelist: the message lists the accepted ones and an explicit conversion
    dtype_case("float64", ".float()", lambda t: t.float()),
    dtype_case("int64", ".int()", lambda t: t.int()),
    dtype_case("int16", ".int()", lambda t: t.int()),
    dtype_case("int8", ".int()", lambda t: t.int()),
    dtype_case("bool", ".to(torch.uint8)", lambda t: t.to(torch.uint8)),
    dtype_case("complex64", ".abs()", lambda t: t.abs()),
    dtype_case("complex128", ".abs().float()", lambda t: t.abs().float()),
    *[dtype_case(name, ".int()" if name == "uint16" else ".float()",
                 (lambda t: t.int()) if name == "uint16" else (lambda t: t.float()))
      for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)],
    *[dtype_case(name, ".float()", lambda t: t.float())
      for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)],
    *[dtype_case("complex32", ".abs().float()", lambda t: t.abs().float())] * hasattr(torch, "complex32"),
    *[Case("dtype-bits8", lambda: torch.zeros(8, 3, dtype=torch.uint8).view(torch.bits8), "pointcloud",
           error=UnsupportedDtypeError, says=r"has dtype bits8; .*e\.g\. x\.view\(torch\.uint8\)",
           fix=lambda t: t.view(torch.uint8))] * hasattr(torch, "bits8"),
    # -- layouts and devices without a dense strided buffer to read
    Case("sparse-coo", lambda: randn(8, 3).to_sparse(), "pointcloud", error=ContractError,
         says=r"sparse_coo tensor; Caliper reads dense tensors: attach x\.to_dense\(\)",
         fix=lambda t: t.to_dense()),
    Case("sparse-csr", sparse_csr, error=ContractError, says=r"sparse_csr tensor.*attach x\.to_dense\(\)",
         fix=lambda t: t.to_dense()),
    Case("quantized", quantized, "pointcloud", error=ContractError,
         says=r"quantized tensor \(qint8\); attach its values as x\.dequantize\(\)",
         fix=lambda t: t.dequantize()),
    Case("nested", nested, "pointcloud", error=ContractError,
         says=r"nested tensor; attach each component \(x\.unbind\(\)\)", fix=lambda t: t.unbind()[1]),
    Case("meta-device", lambda: torch.empty(8, 3, device="meta"), "pointcloud", error=ContractError,
         says=r"meta device, which holds no data; attach a tensor with storage",
         fix=lambda t: cv.empty((8, 3))),
    # -- not a tensor
    Case("list", lambda: [[0.0, 1.0, 2.0]], "pointcloud", error=ContractError,
         says=r"is a list, not a torch tensor; attach a torch tensor", fix=torch.tensor),
    Case("numpy", lambda: np.zeros((8, 3), np.float32), "pointcloud", error=ContractError,
         says=r"ndarray, not a torch tensor; attach a torch tensor \(torch\.from_numpy\(a\)",
         fix=torch.from_numpy),
    Case("none", lambda: None, "pointcloud", error=ContractError, says=r"NoneType, not a torch tensor"),
    # -- sizes
    Case("zero-rows-pointcloud", lambda: torch.zeros(0, 3), "pointcloud", check=empty_panel),
    Case("zero-cols-heatmap", lambda: torch.zeros(4, 0), check=empty_panel),
    Case("zero-size-histogram", lambda: torch.zeros(0), "histogram", check=empty_panel),
    Case("single-point", lambda: torch.tensor([[1.0, 2.0, 3.0]]), "pointcloud", check=zero_copy),
    Case("single-cell", lambda: torch.tensor([[4.0]])),
    Case("beyond-maxStorageBufferRange", lambda: torch.empty(max_range() // 12 + 1, 3), "pointcloud",
         error=TooLargeError, says=r"maxStorageBufferRange\)\. Attach a slice of it",
         fix=lambda t: t[:1000].zero_()),
    Case("at-maxStorageBufferRange", lambda: torch.empty(1, max_range() // 4), check=zero_copy,
         clone=False, render=False),
    # -- values the views cannot draw: drawn as gaps / their own colours, and counted
    Case("nan-inf-points", with_nan_inf_rows, "pointcloud", check=nan_inf_points),
    Case("nan-inf-cells", with_nan_inf_cells, check=stats(nan=2, posinf=1, neginf=3)),
    Case("nan-inf-histogram", with_nan_inf_cells, "histogram", check=stats(nan=2, posinf=1, neginf=3)),
    Case("all-nan-points", lambda: torch.full((20, 3), float("nan")), "pointcloud",
         check=stats(nonfinite=20, drawn=0)),
    # -- autograd
    Case("requires-grad-leaf", grad_leaf, "pointcloud", check=still_trains, clone=False),
    Case("requires-grad-non-leaf", grad_nonleaf, "pointcloud", check=still_trains),
    Case("inference-mode-tensor", inference_tensor, "pointcloud", check=zero_copy),
    # -- the view's own requirements
    Case("unknown-view", lambda: randn(40, 3), "scatter", error=UnknownViewError,
         says=r"unknown view 'scatter'; available views: .*pointcloud"),
    Case("pointcloud-5-columns", lambda: randn(40, 5), "pointcloud", error=ValueError,
         says=r"shape \(40, 5\); the pointcloud view takes \(N, 3\) or \(N, 2\)\. "
              r"Attach a tensor of that shape"),
    Case("pointcloud-1-d", lambda: randn(120), "pointcloud", error=ValueError,
         says=r"shape \(120,\); .*t\.view\(-1, 3\)", fix=lambda t: t.view(-1, 3)),
    Case("pointcloud-0-d", lambda: torch.tensor(1.0), "pointcloud", error=ValueError,
         says=r"shape \(\); the pointcloud view takes"),
    Case("heatmap-3-d", lambda: randn(2, 12, 16), error=ValueError,
         says=r"shape \(2, 12, 16\); the heatmap view takes a 2-D array \(or 1-D\); index or reshape",
         fix=lambda t: t[0]),
    Case("labels-wrong-length", lambda: randn(40, 3), "pointcloud", {"labels": np.arange(39)}, error=ValueError,
         says=r"labels has shape \(39,\); expected \(40,\), one per point"),
    Case("labels-on-heatmap", lambda: randn(12, 16), "heatmap", {"labels": np.arange(12)}, error=TypeError,
         says=r"labels only apply to the pointcloud view"),
    Case("dict-to-one-input-view", lambda: {"a": randn(40, 3)}, "pointcloud", error=TypeError,
         says=r"the pointcloud view reads one tensor; attach a tensor, not a dict"),
]
def test_the_matrix_is_big_enough():
    assert len(CASES) >= 25 and len({c.id for c in CASES}) == len(CASES)
    refused = [c for c in CASES if c.error]
    print(f"\n{len(CASES)} cases: {len(refused)} refused, {len(CASES) - len(refused)} drawn")


def panel_pixels(session, panel):
    r = panel.view.rect
    return session.flush()[r.y:r.y + r.height, r.x:r.x + r.width]


def draws_exactly(session, tensor, view, artifacts, options=None, name="x"):
    panel = session.attach(tensor, view, name=name, **(options or {}))
    assert_same_image(session.render(), session.canvas.reference(), artifacts)
    return panel


def still_works(session, artifacts):
    """Another valid attach draws, exactly, and the failed attach left no panel behind."""
    names = [p.name for p in session.panels]
    panel = draws_exactly(session, randn(50, 3), "pointcloud", artifacts / "after", name="ok")
    assert [p.name for p in session.panels] == [*names, "ok"]
    panel.close()


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_attach(case, artifacts):
    with cv.Session(window=False, size=SIZE) as s:
        t = case.make()
        if case.error is not None:
            with pytest.raises(case.error) as info:
                s.attach(t, case.view, name="x", **case.options)
            assert type(info.value) is case.error or case.error is ValueError, type(info.value)
            assert re.search(case.says, str(info.value)), str(info.value)
            assert s.panels == []
            if case.fix is not None:  # the fix the message names works
                fixed = case.fix(t)
                draws_exactly(s, fixed, case.view, artifacts / "fixed", case.options).close()
        else:
            panel = s.attach(t, case.view, name="x", **case.options)
            if case.render:
                assert_same_image(s.render(), s.canvas.reference(), artifacts)
                if case.clone:  # its own elements: what a private copy of the same values draws
                    own = panel_pixels(s, panel)
                    panel.close()
                    copy = s.attach(t.detach().clone(), case.view, name="x", **case.options)
                    s.render()
                    assert_same_image(own, panel_pixels(s, copy), artifacts / "clone")
                    copy.close()
                    panel = s.attach(t, case.view, name="x", **case.options)
                    s.render()
            if case.check is not None:
                case.check(panel, t)
            panel.close()
        still_works(s, artifacts)


def test_the_module_level_attach_refuses_the_same_way(monkeypatch, tmp_path):
    """``caliper_vk.attach`` (the default session) gives the same errors as ``Session.attach``."""
    from caliper_vk import api

    monkeypatch.setattr(api, "_session", None)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.chdir(tmp_path)
    try:
        with pytest.raises(NotContiguousError, match=r"attach x\.contiguous\(\)"):
            cv.attach(randn(3, 40).T, "pointcloud", name="x")
        with pytest.raises(UnsupportedDtypeError, match=SUPPORTED):
            cv.attach(torch.zeros(8, 3, dtype=torch.float64), "pointcloud", name="x")
        panel = cv.attach(randn(40, 3), "pointcloud", name="x")
        assert panel.path == "zero-copy"
        assert cv.step() is True
    finally:
        if api._session is not None:
            api._session.close()


@pytest.mark.parametrize("view, options", [("scatter", {}), ("heatmap", {"colourmap": "magma"}),
                                           (cv.Heatmap(), {"labels": [1]})])
def test_a_bad_view_or_option_is_refused_before_anything_is_exported(monkeypatch, view, options):
    """Exporting a GPU tensor makes handles and semaphores; a bad view name or option must be
    refused before that, so a typo cannot leak them."""
    from caliper_vk import exporters

    calls = []
    real = exporters.export
    monkeypatch.setattr(exporters, "export", lambda *a, **k: calls.append(a) or real(*a, **k))
    with cv.Session(window=False, size=SIZE) as s:
        with pytest.raises((UnknownViewError, TypeError)):
            s.attach(randn(12, 16), view, name="x", **options)
        assert calls == [] and s.panels == []
