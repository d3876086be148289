"""How big a probe may get, and the cuts that keep it there, on the tensor's own device.

A callback's defaults must hold for a 7B model at sequence 4096 as for a test's toy:
every probe array is cut to a stated size before it is drawn or recorded, and the
panel's title says what was cut (``tokens 0–127 of 4096``). Nothing here copies to
the host: the cuts are views and indexing on the device the model runs on, and the
embedding's principal axes come from a few subspace iterations on a row sample
(cost ``O(rows · dim · 8)`` per iteration), computed once on the device.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """The bounds of the probes (each a maximum; the part kept is named on the panel).

    Parameters
    ----------
    layers : int
        Attention layers drawn (evenly spaced from the first to the last).
    heads : int
        Heads of a layer drawn (the first ones).
    tokens : int
        The probe example's token sequence is cut to this many before the probe
        forward (integer inputs of shape ``(1, T)``), and every map's rows (and an
        attention map's columns) to as many.
    rows : int
        Rows of an embedding projected (evenly spaced over the vocabulary).
    features : int
        Columns of a module output drawn (the first ones).
    """

    layers: int = 4
    heads: int = 8
    tokens: int = 128
    rows: int = 4096
    features: int = 1024

    def __post_init__(self):
        for name in ("layers", "heads", "tokens", "rows", "features"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"Limits({name}={getattr(self, name)!r}): every bound is at least 1")


def as_limits(value) -> Limits:
    """``None`` → the defaults; a dict → ``Limits(**dict)``; a ``Limits`` as is."""
    if value is None:
        return Limits()
    if isinstance(value, Limits):
        return value
    if isinstance(value, dict):
        return Limits(**value)
    raise TypeError(f"limits={value!r}: give a caliper_vk.integrations.Limits or a dict of its fields")


def span(kept: int, total: int, what: str) -> str:
    """``"tokens 0–127 of 4096"``, or ``""`` when nothing was cut."""
    return "" if kept >= total else f"{what} 0–{kept - 1} of {total}"


def cut_tokens(example, tokens: int):
    """The example with its token sequences (integer or bool tensors of shape ``(1, T)``) cut to
    ``tokens``: that bounds the probe forward itself (attention maps grow as T²). Other inputs
    (images, float features) are left whole."""
    import torch

    def cut(t):
        if torch.is_tensor(t) and t.ndim == 2 and not t.is_floating_point() and t.shape[1] > tokens:
            return t[:, :tokens]
        return t

    if isinstance(example, dict):
        return {k: cut(v) for k, v in example.items()}
    return cut(example)


def sequence_length(example) -> int:
    """The longest token sequence (``(1, T)`` integer input) in the example; 0 when there is none."""
    import torch

    values = example.values() if isinstance(example, dict) else [example]
    return max((v.shape[1] for v in values if torch.is_tensor(v) and v.ndim == 2 and not v.is_floating_point()),
               default=0)


def image(t, limits: Limits):
    """A module output as the 2-D float32 array a heatmap draws, on its own device: the first
    example, sequences and channels flattened into rows (``(1, T, D)`` → ``(T, D)``), cut to
    ``limits.tokens`` rows and ``limits.features`` columns. Returns ``(array, note)``."""
    a = t.detach()
    if a.ndim >= 3:
        a = a[0]
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim > 2:
        a = a.reshape(-1, a.shape[-1])
    rows, cols = a.shape
    a = a[:limits.tokens, :limits.features]
    note = ", ".join(s for s in (span(a.shape[0], rows, "rows"), span(a.shape[1], cols, "columns")) if s)
    return a.float().contiguous(), note


def attention(a, limits: Limits, layer: str = ""):
    """One layer's attention map ``(1, H, T, T)``, ``(H, T, T)`` or ``(T, T)`` cut to
    ``limits.heads`` heads and ``limits.tokens`` queries and keys, float32 on its device.
    Returns ``(array, note)``; ``layer`` (``"layer 3 of 12"``) leads the note when given."""
    a = a.detach()
    if a.ndim == 4:
        a = a[0]
    if a.ndim == 3 and a.shape[0] == 1:
        a = a[0]
    notes = [layer] if layer else []
    if a.ndim == 3:
        notes.append(span(min(a.shape[0], limits.heads), a.shape[0], "heads"))
        a = a[:limits.heads]
    t = a.shape[-1]
    notes.append(span(min(t, limits.tokens), t, "tokens"))
    a = a[..., :limits.tokens, :limits.tokens]
    return a.float().contiguous(), ", ".join(n for n in notes if n)


def layers(count: int, limits: Limits) -> list[int]:
    """Indices of the layers drawn: all of them up to ``limits.layers``, else evenly spaced
    from the first to the last."""
    if count <= limits.layers:
        return list(range(count))
    if limits.layers == 1:
        return [count - 1]
    step = (count - 1) / (limits.layers - 1)
    return sorted({round(i * step) for i in range(limits.layers)})


def sample_rows(n: int, rows: int, like=None):
    """Indices of at most ``rows`` of ``n`` rows, evenly spaced (fixed: the same rows every frame),
    on ``like``'s device when given (copied there once: host to device, never back)."""
    import torch

    idx = torch.arange(n) if n <= rows else torch.linspace(0, n - 1, rows).round().long()
    if like is None:
        return idx
    return like.new_empty(idx.shape, dtype=torch.long).copy_(idx)


def principal_axes(x, k: int = 3, iterations: int = 4, oversample: int = 5, seed: int = 0):
    """The top ``k`` principal axes of the centred rows ``x`` (n, d), as a (d, k) float32 matrix
    on ``x``'s device: randomized subspace iteration (Halko, Martinsson & Tropp 2011) from a
    fixed seed with its own generator (the training's random state is untouched). The cost is
    ``iterations`` products with ``x`` of ``k + oversample`` columns: bounded by the row sample,
    never a full SVD. Axes past ``d`` (a matrix of fewer columns) are zero."""
    import torch

    d = x.shape[1]
    width = min(k + oversample, d)
    g = torch.Generator().manual_seed(seed)  # the start on the host (any device has it), copied over once
    q = x.new_empty((d, width)).copy_(torch.randn(d, width, generator=g, dtype=x.dtype))
    q, _ = torch.linalg.qr(q)
    for _ in range(iterations):
        q, _ = torch.linalg.qr(x.T @ (x @ q))
    b = x @ q  # (n, width): x in the subspace; its own axes by a tiny eigendecomposition
    _, vectors = torch.linalg.eigh(b.T @ b)  # ascending
    basis = q @ vectors.flip(-1)[:, :k]
    if basis.shape[1] < k:
        basis = torch.nn.functional.pad(basis, (0, k - basis.shape[1]))
    return basis.contiguous()


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says a device (or the host) ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    return name == "OutOfMemoryError" or "out of memory" in str(exc).lower()
