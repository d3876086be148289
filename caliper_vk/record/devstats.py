"""Training statistics computed on the device the model trains on, without copies of the model.

``watch`` records, every optimizer step, the L2 norm of every parameter's
gradient and weight and the update each parameter received. Done naively that
is a float64 copy of every tensor per norm and a copy of the whole model per
step (the update is ``θ_k − θ_{k−1}``). Here:

- **Norms** come from ``torch._foreach_norm`` over all tensors of one device and
  dtype, accumulated in float32 (``dtype=torch.float32``: a bf16 weight's norm is
  summed in float32, not in bf16): one fused call per group, no temporaries of
  a parameter's size, one small float32 vector out.
- **Updates** come from the optimizer's own state, with no snapshot. After
  ``optimizer.step()`` the update is a function of what the optimizer keeps
  (:func:`update_norms`): SGD's momentum buffer (``Δ = −lr·buf``), or the
  gradient and the weight (plain SGD with weight decay and Nesterov solve for
  ``θ_{k−1}`` exactly: the update is linear in the weight), Adam's and AdamW's
  moments (``Δ = −lr/bc₁ · m / (√v/√bc₂ + ε)``, with AdamW's decoupled decay
  folded in the same way). It is the update the optimizer computed, before its
  rounding into the parameter's dtype. Terms that need arithmetic are
  evaluated in pieces of at most :data:`CHUNK` elements (the only temporaries:
  a few pieces, whatever the model's size). Another optimizer gets ``None``:
  ``watch`` then measures the update from a snapshot on an interval.
- **Histograms** (:func:`histogram_device`) are binned by ``torch.bucketize``
  against float32 thresholds chosen so that every float32 value lands in the
  bin the float64 definition ``floor((v − lo)·bins/(hi − lo))`` gives it
  (:func:`thresholds`): the same counts as the host, in pieces, with no
  float64 copy.

Nothing here reads a value back: every function returns device tensors, which
``Staging`` copies to the host without waiting.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .shards import local

CHUNK = 1 << 20  # elements: the largest temporary a statistic makes (4 MB of float32)


def _groups(tensors):
    """``{(device, dtype): [indices]}`` in first-seen order."""
    out: dict = {}
    for i, t in enumerate(tensors):
        out.setdefault((t.device, t.dtype), []).append(i)
    return out


def on(t, device):
    """``t`` on ``device``: itself when it is there already (no copy), else copied without waiting."""
    return t if t.device == device else t.to(device, non_blocking=True)


def norms(tensors, device=None):
    """L2 norms of ``tensors`` as one float32 vector on ``device`` (default: the first tensor's),
    from one ``torch._foreach_norm`` per (device, dtype) with float32 accumulation. A DTensor's
    norm is its local shard's (:mod:`.shards` sums the shards' squares across ranks)."""
    import torch

    tensors = [local(t).detach() for t in tensors]
    if not tensors:
        return None
    device = device or tensors[0].device
    parts, order = [], []
    for (_, dtype), idx in _groups(tensors).items():
        group = [tensors[i] for i in idx]
        if dtype in (torch.float64, torch.complex128):
            got = torch._foreach_norm(group, 2)  # already at least float32 precision
        else:
            got = torch._foreach_norm(group, 2, dtype=torch.float32)
        parts.append(on(torch.stack(got).float(), device))
        order.extend(idx)
    vec = parts[0] if len(parts) == 1 else torch.cat(parts)
    if order != sorted(order):  # back into the tensors' order (a permutation, made on the host)
        vec = vec[torch.from_numpy(np.argsort(np.array(order)))]
    return vec


def global_norm(vector):
    """``sqrt(Σ nᵢ²)`` of a vector of norms, on its device."""
    import torch

    return torch.linalg.vector_norm(vector) if vector is not None else None


def _num(x):
    """A hyper-parameter or state value as a Python float where that costs no device wait (a
    number, a CPU tensor), else the device tensor itself (a capturable optimizer's step)."""
    if hasattr(x, "device"):
        return float(x) if x.device.type == "cpu" else x.detach()
    return float(x)


def _pieces(*tensors):
    """Flat views of equal-sized tensors, ``CHUNK`` elements at a time (no copies of contiguous
    tensors); of a DTensor, its local shard's (a DTensor's own reshape would be a collective)."""
    flat = [local(t).detach().reshape(-1) for t in tensors]
    n = flat[0].numel()
    for lo in range(0, n, CHUNK):
        yield [f[lo:lo + CHUNK] for f in flat]


def _combination_norm(terms):
    """‖Σ cᵢ·Tᵢ‖ of equal-sized tensors, in float32 pieces; ``terms``: [(coefficient, tensor)]."""
    import torch

    acc = None
    for piece in _pieces(*(t for _, t in terms)):
        work = None
        for (c, _), x in zip(terms, piece, strict=True):
            if work is None:
                work = x.to(torch.float32) * c
            else:
                work.add_(x.to(torch.float32) * c)
        part = torch.linalg.vector_norm(work) ** 2
        acc = part if acc is None else acc + part
    if acc is None:  # an empty tensor (a rank's empty shard)
        return local(terms[0][1]).new_zeros((), dtype=torch.float32)
    return torch.sqrt(acc)


def _adam_norm(p, state, group, decoupled: bool):
    import torch

    if "step" not in state or "exp_avg" not in state:
        return None
    beta1, beta2 = (_num(b) for b in group["betas"])
    lr, eps, t = _num(group["lr"]), float(group["eps"]), _num(state["step"])
    bc1 = 1 - beta1 ** t
    root_bc2 = (1 - beta2 ** t) ** 0.5
    size = lr / bc1
    wd = float(group.get("weight_decay", 0.0)) if decoupled else 0.0
    c = lr * wd / (1 - lr * wd) if wd else 0.0  # AdamW: θ_{k-1} = (θ_k + size·u) / (1 - lr·wd)
    v = state["max_exp_avg_sq"] if group.get("amsgrad") else state["exp_avg_sq"]
    # u·s = m/(√v/r + ε)·s = m/(√v + ε·r)·(s·r): the scale leaves the pass over the piece (and,
    # without decay, the norm: ‖u·s‖ = ‖u‖·|s|) where the values are host numbers
    scale = size * (1 + c)
    folded = isinstance(scale, float) and isinstance(root_bc2, float) and isinstance(c, float) and scale > 0
    acc = None
    for m_, v_, w_ in _pieces(state["exp_avg"], v, p):
        work = torch.sqrt(v_.to(torch.float32))  # the denominator (new: the state is never written)
        if folded:
            work.add_(eps * root_bc2)
            torch.div(m_.to(torch.float32), work, out=work)
            if c:
                work.add_(w_.to(torch.float32), alpha=c / (scale * root_bc2))
        else:
            work.div_(root_bc2).add_(eps)
            torch.div(m_.to(torch.float32), work, out=work)
            work.mul_(scale)
            if c:
                work.add_(w_.to(torch.float32), alpha=c)
        part = torch.linalg.vector_norm(work) ** 2
        acc = part if acc is None else acc + part
    if acc is None:  # an empty tensor (a rank's empty shard)
        return local(p).new_zeros((), dtype=torch.float32)
    return torch.sqrt(acc) * (scale * root_bc2) if folded else torch.sqrt(acc)


def _sgd_norm(p, state, group):
    lr, mu, wd = _num(group["lr"]), float(group.get("momentum", 0)), float(group.get("weight_decay", 0))
    buf = state.get("momentum_buffer")
    if mu and not group.get("nesterov"):
        return None if buf is None else _combination_norm([(lr, buf)])
    if p.grad is None or (mu and buf is None):
        return None
    # Δ = -(lr·wd·θ_k + lr·g + lr·μ·buf) / (1 - lr·wd): the step solved for θ_{k-1}
    scale = 1.0 / (1 - lr * wd) if wd else 1.0
    sign = -1.0 if group.get("maximize") else 1.0
    terms = [(sign * lr * scale, p.grad)]
    if wd:
        terms.append((lr * wd * scale, p))
    if mu:
        terms.append((lr * mu * scale, buf))
    return _combination_norm(terms)


def update_source(optimizer) -> str | None:
    """How :func:`update_norms` measures this optimizer's updates ("sgd", "adam", "adamw"), or
    None (``watch`` then takes snapshots on an interval)."""
    import torch

    if type(optimizer) is torch.optim.SGD:
        return "sgd"
    if type(optimizer) in (torch.optim.Adam, torch.optim.AdamW):
        decoupled = type(optimizer) is torch.optim.AdamW or bool(
            optimizer.defaults.get("decoupled_weight_decay"))
        return "adamw" if decoupled else "adam"
    return None


def _adam_batch(items, group, decoupled: bool):
    """The update norms of Adam's small parameters of one group, dtype and device (``items``:
    ``[(p, state)]``, together at most :data:`CHUNK` elements): the arithmetic of
    :func:`_adam_norm` in a few fused ``torch._foreach_*`` calls for them all, instead of a dozen
    calls per parameter. Their temporaries: about three float32 copies of ``CHUNK // 2`` elements.
    None when a value is a device tensor (a capturable optimizer's step): :func:`_adam_norm` then."""
    import torch

    beta1, beta2 = (_num(b) for b in group["betas"])
    lr, eps = _num(group["lr"]), float(group["eps"])
    steps = [_num(state["step"]) for _, state in items]
    if not all(isinstance(x, float) for x in (beta1, beta2, lr, *steps)):
        return None
    wd = float(group.get("weight_decay", 0.0)) if decoupled else 0.0
    c = lr * wd / (1 - lr * wd) if wd else 0.0
    key = "max_exp_avg_sq" if group.get("amsgrad") else "exp_avg_sq"

    def flat(t):  # float32 (no copy of a float32 tensor: only read, never written)
        return local(t).detach().reshape(-1).to(torch.float32)

    den = torch._foreach_sqrt([flat(state[key]) for _, state in items])
    torch._foreach_div_(den, [(1 - beta2 ** t) ** 0.5 for t in steps])
    torch._foreach_add_(den, eps)
    work = torch._foreach_div([flat(state["exp_avg"]) for _, state in items], den)
    del den
    torch._foreach_mul_(work, [lr / (1 - beta1 ** t) * (1 + c) for t in steps])
    if c:
        torch._foreach_add_(work, [flat(p) for p, _ in items], alpha=c)
    return list(torch._foreach_norm(work, 2))


def update_norms(optimizer, params, source: str):
    """‖θ_k − θ_{k−1}‖ of each of ``params`` from the optimizer's state after its step (see the
    module docstring), as a list of 0-d float32 device tensors (None: not measurable this step,
    such as a parameter the step skipped). Adam's parameters of up to ``CHUNK // 2`` elements are
    measured together, a batch of them at a time (:func:`_adam_batch`); larger ones in pieces."""
    where = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            where[id(p)] = group
    out: list = [None] * len(params)
    batches: dict = {}  # (group, device, dtypes) -> [[indices]]: Adam's small parameters
    sizes: dict = {}
    for i, p in enumerate(params):
        group = where.get(id(p))
        state = optimizer.state.get(p, {})
        if group is None:
            continue
        if source == "sgd":
            out[i] = _sgd_norm(p, state, group)
            continue
        if "step" not in state or "exp_avg" not in state:
            continue
        n = local(p).numel()
        if n > CHUNK // 2:
            out[i] = _adam_norm(p, state, group, decoupled=source == "adamw")
            continue
        key = (id(group), local(p).device, local(p).dtype, local(state["exp_avg"]).dtype)
        if key not in batches or sizes[key] + n > CHUNK // 2:
            batches.setdefault(key, []).append([])
            sizes[key] = 0
        batches[key][-1].append(i)
        sizes[key] += n
    for runs in batches.values():
        for run in runs:
            group = where[id(params[run[0]])]
            items = [(params[i], optimizer.state[params[i]]) for i in run]
            got = _adam_batch(items, group, decoupled=source == "adamw")
            if got is None:
                got = [_adam_norm(p, state, group, decoupled=source == "adamw") for p, state in items]
            for i, norm in zip(run, got, strict=True):
                out[i] = norm
    return out


# -- histograms --------------------------------------------------------------------------------
def _bin(v: np.ndarray, lo: float, hi: float, bins: int) -> np.ndarray:
    return np.floor((v.astype(np.float64) - lo) * (bins / (hi - lo)))


@functools.lru_cache(maxsize=64)
def thresholds(bins: int, lo: float, hi: float) -> tuple[np.ndarray, float]:
    """``(edges, top)``: float32 ``edges[j]`` is the least float32 whose float64 bin is at least
    ``j`` (``edges[0]``: the least float32 ≥ ``lo``), and ``top`` the greatest float32 ≤ ``hi``.
    A float32 value ``v`` is below the range when ``v < edges[0]``, above it when ``v > top``,
    and in bin ``j`` when ``edges[j] ≤ v < edges[j+1]`` (the last bin closed at ``top``):
    exactly the bins of ``floor((v − lo)·bins/(hi − lo))`` in float64, which is monotone in
    ``v``, so its boundaries are thresholds."""
    def key(x) -> int:  # float32s in order as integers (-0.0 and 0.0 meet at 0)
        i = int(np.float32(x).view(np.int32))
        return i if i >= 0 else -(i & 0x7FFFFFFF)

    def value(k: int) -> np.float32:
        bits = k if k >= 0 else (-k) | 0x80000000
        return np.array([bits], np.uint32).view(np.float32)[0]

    big = np.finfo(np.float32).max

    def least(pred, guess: float) -> np.float32:  # pred: false then true along the float32s
        del guess  # (a bisection over the 2^32 patterns: 32 steps, whatever the range)
        a, b = key(-big), key(big)
        while a < b:
            mid = (a + b) // 2
            if pred(value(mid)):
                b = mid
            else:
                a = mid + 1
        return value(a)

    edges = [least(lambda x: float(x) >= lo, lo)]
    for j in range(1, bins):
        edges.append(least(lambda x, j=j: float(x) >= lo and _bin(np.array([x]), lo, hi, bins)[0] >= j,
                           lo + j * (hi - lo) / bins))
    top = least(lambda x: float(x) > hi, hi)
    top = np.nextafter(top, np.float32(-np.inf))
    return np.array(edges, np.float32), float(top)


def histogram_device(values, bins: int, lo: float, hi: float):
    """Counts of ``values`` (a tensor, on its own device) as one int64 device tensor:
    ``bins`` bin counts, then below, above, NaN, ±Inf — the counts
    :func:`~caliper_vk.record.histogram_counts` defines, computed in pieces of ``CHUNK``."""
    import torch

    x = values.detach().reshape(-1)
    out = x.new_zeros(bins + 4, dtype=torch.int64)  # (made like x: on its device)
    if x.dtype == torch.float64:  # the definition's own precision: the formula, in pieces
        for (piece,) in _pieces(x):
            fin = piece[torch.isfinite(piece)]
            idx = torch.floor((fin - lo) * (bins / (hi - lo)))
            below, above = (fin < lo).sum(), (fin > hi).sum()
            idx = idx[(fin >= lo) & (fin <= hi)].long().clamp_(max=bins - 1)
            out[:bins] += torch.bincount(idx, minlength=bins)
            out[bins] += below
            out[bins + 1] += above
            out[bins + 2] += torch.isnan(piece).sum()
            out[bins + 3] += torch.isinf(piece).sum()
        return out
    edges, top = thresholds(int(bins), float(lo), float(hi))
    bounds = x.new_tensor(edges, dtype=torch.float32)
    inf = math.inf
    for (piece,) in _pieces(x):
        f = piece.to(torch.float32)
        idx = torch.bucketize(f, bounds, right=True, out_int32=True)  # 0: below; j: bin j-1; NaN: bins
        counts = torch.bincount(idx, minlength=bins + 1)
        nan = torch.isnan(f).sum()
        above = (f > top).sum()  # includes +Inf (sits in index bins)
        pinf, ninf = (f == inf).sum(), (f == -inf).sum()
        out[:bins] += counts[1:bins + 1]
        out[bins - 1] -= above + nan
        out[bins] += counts[0] - ninf
        out[bins + 1] += above - pinf
        out[bins + 2] += nan
        out[bins + 3] += pinf + ninf
    return out


def unit_axis(shape) -> int:
    """Which axis of an activation holds its units: features of (B, F), the last axis of
    (B, T, F) sequences, channels of (B, C, H, W)."""
    return 1 if len(shape) in (2, 4, 5) else len(shape) - 1


class ActivationStats:
    """Sums of one module's validation outputs, kept on their device (no value read back until
    :meth:`Watcher.flush_activations` stages them)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.count = 0
        self.zeros = None  # device tensors: exact zeros, sum and sum of squares (float64 totals)
        self.sum = None
        self.sumsq = None
        self.alive = None  # per-unit: nonzero for some inspected example (a device bool tensor)

    def add(self, out) -> None:
        import torch

        x = out.detach()
        if x.ndim < 2:
            x = x.reshape(1, -1)
        self.count += x.numel()
        zeros = (x == 0).sum()
        # float32 accumulation over the batch (no float64 copy of it); float64 across batches
        total = x.sum(dtype=torch.float32).double()
        squares = (torch.linalg.vector_norm(x, dtype=torch.float32).double()) ** 2
        if self.zeros is None:
            self.zeros, self.sum, self.sumsq = zeros, total, squares
        else:
            self.zeros, self.sum, self.sumsq = self.zeros + zeros, self.sum + total, self.sumsq + squares
        axis = unit_axis(x.shape)
        dims = [d for d in range(x.ndim) if d != axis]
        alive = (x != 0).any(dim=dims) if dims else (x != 0)
        self.alive = alive if self.alive is None or self.alive.shape != alive.shape else torch.logical_or(
            self.alive, alive)

    def sums(self):
        """``[zeros, sum, sum of squares, dead units]`` as a float64 device vector, or None."""
        import torch

        if not self.count:
            return None
        dead = self.alive.numel() - self.alive.sum()
        return torch.stack([self.zeros.double(), self.sum, self.sumsq, dead.double()])


    def dead_mask(self):
        """Which units were zero for every inspected example: uint8, 1 = dead, one per unit
        (kept beside their number, so a reader can tell the same units staying dead from
        others dying), on their device, or None before any forward."""
        import torch

        return None if self.alive is None else (~self.alive.reshape(-1)).to(torch.uint8)


def histogram_counts(values, bins: int, lo: float, hi: float) -> dict:
    """Counts of ``values`` in ``bins`` equal bins over ``[lo, hi]`` and the counts left out.

    ``bin = floor((v - lo) * bins / (hi - lo))`` in float64, the last bin
    closed; values below ``lo``, above ``hi``, NaN and ±Inf are counted apart and
    are in no bin. Works on a torch tensor on its own device (only the counts
    travel to the host) or on anything numpy can read.
    """
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo) or bins < 1:
        raise ValueError(f"histogram range must be finite with lo < hi and bins >= 1, got [{lo}, {hi}], {bins}")
    if hasattr(values, "detach"):  # binned on its device (devstats.histogram_device): counts travel
        return _counts(histogram_device(values, bins, lo, hi).cpu().numpy(), lo, hi)
    else:
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        nan, inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
        x = x[np.isfinite(x)]
        below, above = int((x < lo).sum()), int((x > hi).sum())
        x = x[(x >= lo) & (x <= hi)]
        idx = np.minimum(np.floor((x - lo) * (bins / (hi - lo))).astype(np.int64), bins - 1)
        counts = np.bincount(idx, minlength=bins)
    return {"lo": float(lo), "hi": float(hi), "counts": counts.astype(np.int64),
            "below": below, "above": above, "nan": nan, "inf": inf}


def _counts(v: np.ndarray, lo: float, hi: float) -> dict:
    """:func:`histogram_counts`'s dict from ``histogram_device``'s vector (bins, then below, above,
    NaN, ±Inf)."""
    v = np.asarray(v, dtype=np.int64)
    return {"lo": float(lo), "hi": float(hi), "counts": v[:-4], "below": int(v[-4]), "above": int(v[-3]),
            "nan": int(v[-2]), "inf": int(v[-1])}
