"""Adam's update norms in a few fused calls (issue 30: the largest part of ``watch``'s time on the
step): the batched ``torch._foreach_*`` path gives the per-parameter path's norms, for every kind
of parameter the optimizers keep, and its number of operators does not grow with the number of
parameters."""

import pytest
import torch
from torch.overrides import TorchFunctionMode

from caliper_vk.record import devstats

KINDS = {
    "adam": (lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01), "adam"),
    "adamw": (lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1), "adamw"),
    "adamw-amsgrad": (lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True), "adamw"),
}


# views, conversions and metadata: what is left per parameter (no arithmetic on its values)
NOT_ARITHMETIC = {"__get__", "detach", "reshape", "to", "numel", "__float__", "__getitem__"}


class _Calls(TorchFunctionMode):
    """The arithmetic torch calls made from Python (each at least a kernel launch on a GPU)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += getattr(func, "__name__", "") not in NOT_ARITHMETIC
        return func(*args, **(kwargs or {}))


def _stepped(kind, n_params, dtype=torch.float32, steps=3):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(7 + i, 5, dtype=dtype)) for i in range(n_params)]
    make, source = KINDS[kind]
    opt = make(params)
    for _ in range(steps):
        opt.zero_grad()
        sum((p.float() ** 2).sum() * (i + 1) for i, p in enumerate(params)).backward()
        opt.step()
    return opt, params, source


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", list(KINDS))
def test_the_fused_adam_norms_are_the_per_parameter_ones(kind, dtype):
    opt, params, source = _stepped(kind, 12, dtype)
    fused = devstats.update_norms(opt, params, source)
    group = opt.param_groups[0]
    each = [devstats._adam_norm(p, opt.state[p], group, decoupled=source == "adamw") for p in params]
    assert all(f is not None and f.dtype == torch.float32 and f.ndim == 0 for f in fused)
    torch.testing.assert_close(torch.stack(fused), torch.stack(each), rtol=1e-5, atol=0)


def test_batches_split_at_the_piece_size_and_large_parameters_go_in_pieces(monkeypatch):
    opt, params, source = _stepped("adamw", 12)
    whole = torch.stack(devstats.update_norms(opt, params, source))
    monkeypatch.setattr(devstats, "CHUNK", 2 * 60)  # batches of <= 60 elements; the last ones alone
    torch.testing.assert_close(torch.stack(devstats.update_norms(opt, params, source)), whole,
                               rtol=1e-5, atol=0)


def test_a_parameter_without_state_and_one_outside_the_optimizer_have_no_norm():
    opt, params, source = _stepped("adam", 3)
    fresh = torch.nn.Parameter(torch.randn(4))
    opt.add_param_group({"params": [fresh]})  # no step taken with it yet: no state
    stranger = torch.nn.Parameter(torch.randn(4))
    got = devstats.update_norms(opt, [*params, fresh, stranger], source)
    assert all(g is not None for g in got[:3]) and got[3] is None and got[4] is None


def test_the_fused_path_makes_far_fewer_calls_than_one_parameter_at_a_time():
    opt, params, source = _stepped("adamw", 40)
    group = opt.param_groups[0]
    with _Calls() as fused:
        devstats.update_norms(opt, params, source)
    with _Calls() as each:
        [devstats._adam_norm(p, opt.state[p], group, decoupled=True) for p in params]
    # one parameter at a time: nine calls each; fused: a handful for all of them
    assert each.count >= 8 * len(params)
    assert fused.count <= 10, (fused.count, each.count)
