"""A panel whose tensor nobody else can reach any more says so: ``attach(p.grad)`` then
``zero_grad()`` (set_to_none, torch's default), or a module that assigns a new tensor to the
attached attribute every forward. The panel keeps its last values on screen, its title and the
status line say "not updated since step N", and it no longer claims a live path."""

from __future__ import annotations

import gc

import torch

import caliper_vk as cv
from device_paths import cpu_path

SIZE = (320, 200)


def _title(panel) -> str:
    items = panel.label.right
    return "".join(item[0] for item in items if isinstance(item, tuple) and isinstance(item[0], str))


def test_a_gradient_set_to_none_by_zero_grad_is_reported_stale():
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    lin(x).sum().backward()
    with cv.Session(window=False, size=SIZE) as s:
        panel = s.attach(lin.weight.grad, "heatmap", name="grad")
        for step in (1, 2):
            assert s.step(step)
            s.flush()
        assert panel.stale_since is None and f"grad: {cpu_path()}" in s.status().line()
        opt.step()
        opt.zero_grad()  # set_to_none=True: the next backward makes a new tensor
        lin(x).sum().backward()
        gc.collect()
        s.step(3)
        s.flush()
        assert panel.stale_since == 2, panel.stale_since
        line = s.status().line()
        assert "grad: not updated since step 2" in line and "zero-copy" not in line, line
        s.step(4)
        s.flush()
        assert "not updated since step 2" in _title(panel), panel.label.right
        assert s.frames >= 3  # the panel stays on screen with its last values, training goes on


def test_a_module_attribute_reassigned_each_forward_is_reported_stale():
    class Attn(torch.nn.Module):
        def forward(self, x):
            self.weights = torch.softmax(x @ x.T, dim=-1)
            return self.weights @ x

    m, x = Attn(), torch.randn(6, 4)
    m(x)
    with cv.Session(window=False, size=SIZE) as s:
        panel = s.attach(m.weights, "heatmap", name="attn")
        s.step(1)
        s.flush()
        m(x)  # a new tensor in m.weights; the attached one is unreachable
        s.step(2)
        s.flush()
        assert panel.stale_since == 1 and "attn: not updated since step 1" in s.status().line()


def test_a_tensor_the_loop_keeps_and_writes_in_place_stays_live():
    emb = cv.empty((50, 3))
    with cv.Session(window=False, size=SIZE) as s:
        panel = s.attach(emb, "pointcloud", name="emb")
        for step in range(1, 8):
            with panel.writing():
                emb.normal_()
            s.step(step)
            gc.collect()
        s.flush()
        assert panel.stale_since is None and s._plan is not None
        assert f"emb: {cpu_path()}" in s.status().line()


def test_a_stale_panel_does_not_keep_the_steady_frame_from_being_planned():
    g = torch.randn(8, 8)
    keep = cv.empty((8, 8))
    with cv.Session(window=False, size=SIZE) as s:
        s.attach(g, "heatmap", name="gone")
        s.attach(keep, "heatmap", name="kept")
        s.step(1)
        s.flush()
        del g
        gc.collect()
        for step in range(2, 6):
            s.step(step)
            s.flush()
        assert s.panels[0].stale_since == 1 and s.panels[1].stale_since is None
        assert s._plan is not None and len(s._plan.tensors) == 1


def test_a_host_fed_panel_has_no_tensor_to_go_stale():
    from caliper_vk.views import Text

    with cv.Session(window=False, size=SIZE) as s:
        panel = s.add(Text("samples"), name="samples")
        s.step(1)
        s.flush()
        assert panel.status == "samples: host data" and "samples: host data" in s.status().line()
