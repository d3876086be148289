"""The wrappers ``watch`` sees through, and the hooks' small helpers: DDP, DataParallel, FSDP1 and
``torch.compile`` wrap a model whose parameters and hooks are the original module's
(:func:`unwrap`, :func:`clean_name`); a closure passed to ``optimizer.step``; a hook that
``torch.compile`` runs as plain Python."""

from __future__ import annotations


WRAPPER_NAMES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


def _wrappers() -> tuple:
    import torch

    found = [torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel]
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # a torch built without distributed
        pass
    else:
        found.append(FullyShardedDataParallel)
    return tuple(found)


def clean_name(name: str) -> str:
    """A parameter's or module's name without the wrappers' segments that nested FSDP1 units,
    activation checkpointing and torch.compile put inside a model (``2._fsdp_wrapped_module.weight``
    is ``2.weight``)."""
    for part in WRAPPER_NAMES:
        name = name.replace(part, "")
    return name


def unwrap(model):
    """The module whose parameters and hooks are the model's own: ``model.module`` of
    ``DistributedDataParallel`` / ``DataParallel`` / FSDP1's ``FullyShardedDataParallel``,
    ``model._orig_mod`` of ``torch.compile`` (nested wrappers too). Hooks on the wrapper would
    name parameters ``module.…``, ``_fsdp_wrapped_module.…`` or ``_orig_mod.…``; on the original
    they run inside the wrapper's forward as well. FSDP2's ``fully_shard`` wraps nothing: the
    model is its own module (its parameters are DTensors)."""
    import torch

    wrappers = _wrappers()
    for _ in range(8):  # bounded: wrappers nest a few levels at most
        inner = getattr(model, "_orig_mod", None)
        if inner is None and isinstance(model, wrappers):
            inner = model.module
        if not isinstance(inner, torch.nn.Module):
            return model
        model = inner
    return model


def _closure_of(optimizer, args, kwargs) -> tuple:
    """``(closure, where)`` of an ``optimizer.step`` call as its hooks see it (``args`` starts with
    the optimizer itself): the closure passed as the first argument (``where`` its index in
    ``args``) or as ``closure=`` (``where`` "closure"); ``(None, None)`` without one."""
    at = 1 if args and args[0] is optimizer else 0
    if len(args) > at and callable(args[at]):
        return args[at], at
    closure = kwargs.get("closure")
    return (closure, "closure") if callable(closure) else (None, None)


def _eager(fn):
    """A hook torch.compile runs as plain Python instead of tracing it (it reads clocks and
    stores Python state; traced, each of those is a graph break and a warning)."""
    import torch

    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn
