"""What the callbacks take from a trainer's batches, outputs, metrics and model: the fixed probe
example, the first tensor of an output, metric names in the recorder's convention, the single
numbers among a trainer's metrics, and the device-side buffers the probes are drawn from."""

from __future__ import annotations


def first_example(batch):
    """The first example of a batch, kept as the fixed probe input: a tensor ``x[:1]``, the
    inputs of an ``(x, y)`` pair, or a dict of tensors (labels dropped)."""
    import torch

    if torch.is_tensor(batch):
        return batch[:1].detach().clone()
    if isinstance(batch, dict):
        return {k: v[:1].detach().clone() for k, v in batch.items()
                if torch.is_tensor(v) and v.ndim >= 1 and k not in ("labels", "label")}
    if isinstance(batch, (list, tuple)) and batch:
        return first_example(batch[0])
    raise TypeError(f"cannot take a probe example from a batch of type {type(batch).__name__}; "
                    "pass example= to the callback")


def metric_name(name: str) -> str:
    """A trainer's metric name in the recorder's convention: ``train_loss`` → ``train/loss``,
    ``loss`` → ``train/loss``, ``eval_loss`` / ``val_loss`` → ``val/loss``."""
    name = str(name)
    if "/" in name:
        return name
    if name == "loss":
        return "train/loss"
    for prefix in ("eval_", "val_", "valid_", "validation_"):
        if name.startswith(prefix):
            return "val/" + name[len(prefix):]
    if name.startswith("train_"):
        return "train/" + name[len("train_"):]
    return "train/" + name


def scalars(metrics: dict) -> dict:
    """The single numbers among ``metrics``, named in the recorder's convention: floats and ints as
    floats, one-element tensors as detached tensors on their device, never read here (a read is a
    wait for the device: the recorder and the loss curve take them when they have arrived)."""
    out = {}
    for k, v in metrics.items():
        if hasattr(v, "numel"):
            if v.numel() != 1:
                continue
            out[metric_name(k)] = v.detach()
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        out[metric_name(k)] = float(v)
    return out


def first_tensor(out):
    import torch

    if torch.is_tensor(out):
        return out
    if isinstance(out, (list, tuple)):
        return next((o for o in out if torch.is_tensor(o)), None)
    for key in ("last_hidden_state", "logits"):
        v = getattr(out, key, None)
        if torch.is_tensor(v):
            return v
    return None


def _empty(a):
    """A panel buffer for ``a`` on ``a``'s own device (``caliper_vk.empty``): read in place by the
    renderer (zero-copy, or one on-device copy), written by a device-side ``copy_``."""
    import caliper_vk as cv

    kind = a.device.type
    return cv.empty(tuple(a.shape), a.dtype, device=a.device if kind in ("cpu", "cuda", "mps") else "cpu")


def _sharded(model) -> bool:
    """Whether ``model``'s parameters are sharded across ranks (DTensor, FSDP1's flat parameters, or
    any FSDP1 unit: with ``use_orig_params`` its parameters are plain tensors holding a shard)."""
    if any(type(p).__name__ in ("DTensor", "FlatParameter") for p in model.parameters()):
        return True
    return any(type(m).__name__ == "FullyShardedDataParallel" for m in model.modules())


def _to(example, device):
    import torch

    def move(v):
        return v.to(device) if torch.is_tensor(v) and v.device != device else v

    if isinstance(example, dict):
        return {k: move(v) for k, v in example.items()}
    return move(example)
