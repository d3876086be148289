"""Turning user input (numpy arrays, torch tensors, lists) into checked host arrays.

Used by the views' ``set_data`` on the host path, the recorder and, for the
tensors it stages, the live-attach path (:mod:`caliper_vk.exporters`).
:func:`host_array` is the one place a torch tensor becomes a numpy array.
"""

from __future__ import annotations

import numpy as np

ACCEPTED_NUMERIC = "float16, bfloat16, float32, float64, int8..int64, uint8..uint64"


def host_array(tensor) -> tuple[np.ndarray, str]:
    """A torch tensor as ``(numpy array, dtype name)``, values and bytes unchanged.

    A CPU tensor's array shares its memory (no copy: the live path reads what the
    producer writes); any other device's tensor is copied to the host first (a
    blocking copy, ordered after the work queued on torch's current stream).
    numpy has no bfloat16, so a bfloat16 tensor comes back as its raw uint16 bits
    with dtype ``"bfloat16"`` (decode: ``bits << 16`` viewed as float32).
    """
    import torch

    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    dtype = str(t.dtype).replace("torch.", "")
    if dtype == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16), dtype
    return t.numpy(), dtype


def is_torch_tensor(x) -> bool:
    """True for a torch tensor, subclasses included, without importing torch."""
    return any(c.__module__.startswith("torch") for c in type(x).__mro__[:-1])


def bfloat16_to_float32(bits: np.ndarray) -> np.ndarray:
    """Raw bfloat16 bits (uint16) as float32, exactly (what the shaders decode)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_host(x, name: str) -> np.ndarray:
    """``x`` as a numpy array without changing its values (torch: detached CPU copy)."""
    if is_torch_tensor(x):
        a, dtype = host_array(x)
        return bfloat16_to_float32(a) if dtype == "bfloat16" else a
    try:
        return np.asarray(x)
    except Exception as exc:
        raise TypeError(f"{name}: cannot read {type(x).__name__} as an array ({exc})") from exc


def as_float32(x, name: str) -> np.ndarray:
    """Numeric input converted to contiguous float32; other dtypes are refused."""
    a = to_host(x, name)
    if a.dtype.kind not in "fiu" or a.dtype.itemsize > 8:
        raise TypeError(
            f"{name} has dtype {a.dtype}; accepted: {ACCEPTED_NUMERIC} "
            "(convert booleans or complex numbers explicitly, e.g. x.float() or x.real)"
        )
    return np.ascontiguousarray(a, dtype=np.float32)


def as_labels(x, n: int, name: str = "labels") -> np.ndarray:
    """Integer class labels (N,) as uint32; negative labels mean 'unlabelled'."""
    a = to_host(x, name)
    if a.dtype.kind not in "iub":
        raise TypeError(f"{name} has dtype {a.dtype}; labels must be integers (class indices)")
    a = a.reshape(-1) if a.ndim == 2 and 1 in a.shape else a
    if a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name} has shape {tuple(a.shape)}; expected ({n},), one per point")
    if a.dtype in (np.uint8, np.uint16, np.uint32):
        return np.ascontiguousarray(a, dtype=np.uint32)
    if a.size and a.min() >= 0 and a.max() < 0xFFFFFFFF:
        return a.astype(np.uint32)
    a = a.astype(np.int64)
    return np.where(a < 0, 0xFFFFFFFF, a % 0xFFFFFFFF).astype(np.uint32)
