"""What ``watch`` adds to a model's memory: the peak of the bytes its hooks allocate and keep.

``watch`` promises (issue 30) at most 1% of the parameters' bytes plus fixed buffers: no copy
of the model, no float64 copy of a parameter, temporaries of at most :data:`.devstats.CHUNK`
elements. A process's resident set cannot show that on a model of 100M bf16 parameters (1%
is 2 MB, less than what the allocator and Python move on their own between two runs), so
:class:`HookFootprint` counts at the source: every tensor an operator returns while one of
the watcher's hooks runs, unless it is a view of its input or writes into one (the schema
says which), is new memory of its storage's size, alive until the tensor is collected. The
peak of that sum over a run is what the hooks add at their worst, whatever else the process
does. The bench's memory row (``bench/recording.py``) and its test read it.
"""

from __future__ import annotations

import weakref


class HookFootprint:
    """Counts the bytes allocated inside a :class:`~.watch.Watcher`'s optimizer hooks.

    >>> footprint = HookFootprint(watcher)            # doctest: +SKIP
    >>> ...                                           # training steps
    >>> footprint.peak_bytes, footprint.live_bytes    # doctest: +SKIP

    ``remove()`` puts the hooks back as they were. Running the hooks under a dispatch mode
    slows them: measure memory with it, never time.
    """

    def __init__(self, watcher):
        self.watcher = watcher
        self.live_bytes = 0
        self.peak_bytes = 0
        self.tensors = 0
        self.largest = 0  # bytes of the largest single tensor counted
        self._swapped: list = []  # (hooks dict, id, the hook as watch registered it)
        wanted = {watcher._pre_step, watcher._post_step}  # (bound methods compare by function and self)
        for handle in watcher._handles:  # the optimizer's hooks, wrapped where they are registered
            hooks = handle.hooks_dict_ref()
            hook = None if hooks is None else hooks.get(handle.id)
            if hook is not None and hook in wanted:
                self._swapped.append((hooks, handle.id, hook))
                hooks[handle.id] = self._wrap(hook)
        if len(self._swapped) != 2:
            raise RuntimeError("HookFootprint: the watcher's optimizer hooks were not found (removed?)")

    def _wrap(self, hook):
        def counted(*args, **kwargs):
            with _mode(self):
                return hook(*args, **kwargs)
        return counted

    def _add(self, tensor) -> None:
        try:
            nbytes = tensor.untyped_storage().nbytes()
        except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, sparse)
            return
        self.live_bytes += nbytes
        self.tensors += 1
        self.largest = max(self.largest, nbytes)
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(tensor, self._release, nbytes)

    def _release(self, nbytes: int) -> None:
        self.live_bytes -= nbytes

    def remove(self) -> None:
        """The watcher's hooks as ``watch`` registered them (a second call changes nothing)."""
        for hooks, key, hook in self._swapped:
            if key in hooks:
                hooks[key] = hook
        self._swapped = []


def _mode(footprint: HookFootprint):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            flat, _ = tree_flatten(out)
            alias = [r.alias_info is not None for r in func._schema.returns]
            for i, t in enumerate(flat):  # (one return of a list type covers every tensor in it)
                aliased = alias[i] if len(alias) == len(flat) else len(alias) == 1 and alias[0]
                if isinstance(t, torch.Tensor) and not aliased:
                    footprint._add(t)
            return out

    return Mode()
