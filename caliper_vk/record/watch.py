"""``watch(model, optimizer, recorder)``: record what a training loop does, through hooks.

Like ``wandb.watch``, it installs hooks and leaves the loop as it is:

- an optimizer **pre-step** hook measures what the update is about to use:
  the L2 norm of every named parameter's gradient and the global norm (all
  entries of all gradients), the learning rate of each parameter group, and,
  when a clipping cap is given, whether this step's norm reached it;
- an optimizer **post-step** hook advances the step and measures the result:
  per-parameter and global weight norms, the update-to-weight ratio
  ``‖θ_k − θ_{k−1}‖ / max(‖θ_k‖, ε)``, throughput and the timing split, memory,
  and (every ``histograms_every`` steps) weight histograms;
- a model wrapped in ``DistributedDataParallel`` or compiled with ``torch.compile`` is
  watched through the module it wraps (``model.module`` / ``model._orig_mod``), so
  parameter and module names are the original's;
- forward hooks on the named ``activations`` modules collect, during a
  validation forward (model in eval mode), the activation standard deviation,
  the zero fraction and the dead units (units zero for every inspected example);
  they do nothing while the model trains.

Timing boundaries (both recorded in milliseconds): ``time/wait_ms`` runs from
the end of one ``optimizer.step()`` to the next training forward (batch
preparation, data loading, logging — validation time excluded);
``time/compute_ms`` runs from that forward to the end of ``optimizer.step()``
(forward, backward, clipping, update). On a GPU these are host times: work
still queued on the device is not in them.
"""

from __future__ import annotations

import contextlib
import os
import time

from .._arrays import to_host
from .._log import logger
from .recorder import Recorder

EPS = 1e-12


RSS_MISSING = ("this platform has no /proc/self/statm and psutil is not installed "
               "(pip install 'caliper-vk[memory]')")


def _rss_bytes() -> float | None:
    """The process's resident memory: from /proc (Linux), else from psutil where it is installed
    (macOS, Windows: ``pip install 'caliper-vk[memory]'``), else None (the metric stays missing)."""
    try:
        with open("/proc/self/statm") as f:
            return float(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return float(psutil.Process().memory_info().rss)


def _norms(tensors) -> list[float]:
    """L2 norms (in float64) of ``tensors``, read back to the host in one transfer: one
    device synchronisation per step instead of one per parameter."""
    import torch

    norms = [torch.linalg.vector_norm(t.detach().double()) for t in tensors]
    if not norms:
        return []
    return torch.stack([n.to(norms[0].device) for n in norms]).tolist()  # a model may span devices


def unwrap(model):
    """The module whose parameters and hooks are the model's own: ``model.module`` of
    ``DistributedDataParallel`` / ``DataParallel``, ``model._orig_mod`` of ``torch.compile``
    (nested wrappers too). Hooks on the wrapper would name parameters ``module.…`` or
    ``_orig_mod.…``; on the original they run inside the wrapper's forward as well."""
    import torch

    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    for _ in range(8):  # bounded: wrappers nest a few levels at most
        inner = getattr(model, "_orig_mod", None)
        if inner is None and isinstance(model, wrappers):
            inner = model.module
        if not isinstance(inner, torch.nn.Module):
            return model
        model = inner
    return model


def _eager(fn):
    """A hook torch.compile runs as plain Python instead of tracing it (it reads clocks and
    stores Python state; traced, each of those is a graph break and a warning)."""
    import torch

    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn


def unit_axis(shape) -> int:
    """Which axis of an activation holds its units: features of (B, F), the last axis of
    (B, T, F) sequences, channels of (B, C, H, W)."""
    return 1 if len(shape) in (2, 4, 5) else len(shape) - 1


class _ActivationStats:
    def __init__(self):
        self.reset()

    def reset(self):
        self.count = 0
        self.zeros = 0
        self.sum = 0.0
        self.sumsq = 0.0
        self.alive = None  # per-unit: nonzero for some inspected example

    def add(self, out) -> None:
        import torch

        x = out.detach()
        if x.ndim < 2:
            x = x.reshape(1, -1)
        xf = x.double()
        self.count += x.numel()
        self.zeros += int((x == 0).sum())
        self.sum += float(xf.sum())
        self.sumsq += float((xf * xf).sum())
        axis = unit_axis(x.shape)
        dims = [d for d in range(x.ndim) if d != axis]
        alive = (x != 0).any(dim=dims) if dims else (x != 0)
        alive = alive.cpu()
        self.alive = alive if self.alive is None or self.alive.shape != alive.shape else torch.logical_or(
            self.alive, alive)

    def summary(self) -> dict | None:
        if not self.count:
            return None
        mean = self.sum / self.count
        var = max(self.sumsq / self.count - mean * mean, 0.0)
        units = int(self.alive.numel())
        dead = units - int(self.alive.sum())
        return {"std": var ** 0.5, "zero_frac": self.zeros / self.count, "dead_frac": dead / units,
                "dead_units": float(dead)}

    def dead_mask(self):
        """Which units were zero for every inspected example: uint8, 1 = dead, one per unit
        (kept beside their number, so a reader can tell the same units staying dead from
        others dying), or None before any forward."""
        return None if self.alive is None else (~self.alive.reshape(-1)).numpy().astype("uint8")


class Watcher:
    """The hooks ``watch`` installs; ``remove()`` takes them out again."""

    def __init__(self, model, optimizer, recorder: Recorder, clip: float | None = None,
                 histograms_every: int | None = 100, histogram_bins: int = 12, histogram_range=(-3.0, 3.0),
                 activations=(), update_ratio: bool = True, memory: bool = True):
        model = unwrap(model)  # DDP / torch.compile: the hooks go on the original module
        self.model, self.optimizer, self.rec = model, optimizer, recorder
        self.clip = clip
        self.histograms_every = histograms_every
        self.bins, self.range = histogram_bins, histogram_range
        self.update_ratio = update_ratio
        self.memory = memory
        self.names = {id(p): n for n, p in model.named_parameters()}
        self._before: dict[int, object] = {}
        self._handles = []
        self._preclip: float | None = None
        self._pending: dict = {}
        self._last_end = None
        self._forward_start = None
        self._batch = 0
        self._examples = 0
        self._eval_time = 0.0
        self._eval_started = None
        self._modules = {}
        self._stats: dict[str, _ActivationStats] = {}
        self._pending_stats = False
        modules = dict(model.named_modules())
        for name in activations:
            if name not in modules:
                raise KeyError(f"watch(activations=...): the model has no module {name!r}; its modules are "
                               f"{', '.join(n for n in modules if n)[:400]}")
            self._stats[name] = _ActivationStats()
            self._handles.append(modules[name].register_forward_hook(_eager(self._activation_hook(name))))
        self._handles.append(optimizer.register_step_pre_hook(self._pre_step))
        self._handles.append(optimizer.register_step_post_hook(self._post_step))
        self._handles.append(model.register_forward_pre_hook(_eager(self._forward_pre)))
        if clip is not None:
            recorder.define("clip/threshold", description="gradient-norm clipping cap given to watch()")
            recorder.define("clip/hit", description="1 when this step's global gradient norm reached the cap")
        recorder.define("grad_norm/global", description="L2 norm of all gradient entries, as the optimizer "
                        "received them (after any clipping)")
        if update_ratio:
            recorder.define("update_ratio/global",
                            description="||theta_k - theta_(k-1)|| / max(||theta_k||, 1e-12)")
        recorder.define("throughput/examples_per_s", unit="examples/s",
                        description="training examples per second between optimizer steps (wait + compute)")
        recorder.define("time/wait_ms", unit="ms", description="end of optimizer.step() to the next training "
                        "forward (batch preparation, loading, logging; validation excluded)")
        recorder.define("time/compute_ms", unit="ms", description="training forward start to the end of "
                        "optimizer.step() (forward, backward, clipping, update; host time)")
        if memory:
            missing = None if _rss_bytes() is not None else RSS_MISSING
            recorder.define("memory/rss_bytes", unit="bytes", description="process resident set (RAM), not "
                            "device memory" + (f"; not measured in this run: {missing}" if missing else ""))
            if missing:  # said once, and in the metric's definition: a missing curve is not a silent one
                logger.warning(f"memory/rss_bytes is not recorded: {missing}")
        if histograms_every:
            self.histograms()

    # -- hooks -------------------------------------------------------------------------
    def _forward_pre(self, module, args):
        if not module.training:
            if self._eval_started is None:
                self._eval_started = time.perf_counter()
            return
        if self._eval_started is not None:
            self._eval_time += time.perf_counter() - self._eval_started
            self._eval_started = None
        if self._pending_stats:
            self.flush_activations()
        if self._forward_start is None:
            self._forward_start = time.perf_counter()
            first = next((a for a in args if hasattr(a, "shape")), None)
            self._batch = int(first.shape[0]) if first is not None and len(first.shape) else 1
            self._examples += self._batch

    def _activation_hook(self, name):
        def hook(module, args, out):
            if module.training or not hasattr(out, "detach"):
                return
            self._stats[name].add(out)
            self._pending_stats = True
        return hook

    def _pre_step(self, optimizer, args, kwargs):
        import torch

        values = {}
        total = 0.0
        with torch.no_grad():
            params = [(p, name) for p, name in self._params() if p.grad is not None]
            for (p, name), n in zip(params, _norms(p.grad for p, _ in params), strict=True):
                values[f"grad_norm/{name}"] = n
                total += n * n
                if self.update_ratio:
                    self._before[id(p)] = p.detach().clone()
        values["grad_norm/global"] = total ** 0.5
        for i, group in enumerate(optimizer.param_groups):
            values[f"lr/{group.get('name', f'group{i}')}"] = float(group["lr"])
        if self.clip is not None:
            values["clip/threshold"] = float(self.clip)
            seen = self._preclip if self._preclip is not None else values["grad_norm/global"]
            values["clip/hit"] = 1.0 if seen >= self.clip * (1 - 1e-5) else 0.0
            if self._preclip is not None:
                values["grad_norm/global_preclip"] = self._preclip
        self._preclip = None
        self._pending = values

    def _post_step(self, optimizer, args, kwargs):
        import torch

        now = time.perf_counter()
        step = self.rec.advance(examples=self._examples or None)  # (the epoch by examples: train_size=)
        values = self._pending
        # weight norms every step; update ratios when asked for and a parameter moved
        num = den = 0.0
        with torch.no_grad():
            params = list(self._params())
            befores = [self._before.pop(id(p), None) for p, _ in params]
            moved = [(p, b) for (p, _), b in zip(params, befores, strict=True) if b is not None]
            weights = _norms(p for p, _ in params)
            deltas = iter(_norms(p.detach().double() - b.double() for p, b in moved) if moved else ())
            for (_, name), before, w in zip(params, befores, weights, strict=True):
                values[f"weight_norm/{name}"] = w
                den += w * w
                if before is not None:
                    d = next(deltas)
                    values[f"update_ratio/{name}"] = d / max(w, EPS)
                    num += d * d
        if params:
            values["weight_norm/global"] = den ** 0.5
        if moved:
            values["update_ratio/global"] = num ** 0.5 / max(den ** 0.5, EPS)
        if self._forward_start is not None:
            values["time/compute_ms"] = (now - self._forward_start) * 1e3
            if self._last_end is not None:
                wait = self._forward_start - self._last_end - self._eval_time
                values["time/wait_ms"] = max(wait, 0.0) * 1e3
                span = now - self._last_end - self._eval_time
                if span > 0:
                    values["throughput/examples_per_s"] = self._examples / span
        if self.memory:
            rss = _rss_bytes()
            if rss is not None:
                values["memory/rss_bytes"] = rss
            device = self._device_memory()
            if device is not None:
                values[device[0]] = device[1]
        self.rec.log(values, step=step)
        self._last_end = time.perf_counter()
        self._forward_start, self._examples, self._eval_time = None, 0, 0.0
        if self.histograms_every and step % self.histograms_every == 0:
            self.histograms()

    # -- helpers -----------------------------------------------------------------------
    def _params(self):
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                yield p, self.names.get(id(p), f"param{id(p)}")

    def _device_memory(self):
        import torch

        p = next(self.model.parameters(), None)
        if p is None:
            return None
        if p.device.type == "cuda":
            return (f"memory/cuda{p.device.index or 0}_allocated_bytes",
                    float(torch.cuda.memory_allocated(p.device)))
        if p.device.type == "mps":
            return "memory/mps_allocated_bytes", float(torch.mps.current_allocated_memory())
        return None

    def clip_grad_norm_(self, max_norm: float | None = None, norm_type: float = 2.0):
        """``torch.nn.utils.clip_grad_norm_`` over the watched parameters, recording the norm
        before clipping (``grad_norm/global_preclip``) beside the clipped one."""
        import torch

        cap = self.clip if max_norm is None else max_norm
        if cap is None:
            raise ValueError("clip_grad_norm_ needs max_norm=, or watch(..., clip=...)")
        self.clip = cap
        total = torch.nn.utils.clip_grad_norm_([p for p, _ in self._params()], cap, norm_type=norm_type)
        self._preclip = float(total)
        return total

    def histograms(self, step: int | None = None) -> None:
        """Record a fixed-bin histogram of every watched parameter now."""
        for p, name in self._params():
            self.rec.histogram(f"weights/{name}", p.detach(), bins=self.bins, value_range=self.range, step=step)

    def flush_activations(self) -> None:
        """Record the activation statistics gathered since the last flush (at the current step)."""
        values, masks = {}, {}
        for name, stats in self._stats.items():
            s = stats.summary()
            if s is not None:
                masks[name] = stats.dead_mask()
            stats.reset()
            if s is None:
                continue
            for k, v in s.items():
                values[f"act/{k}/{name}"] = v
        self._pending_stats = False
        if values:
            self.rec.log(values)
        for name, mask in masks.items():  # which units, as an array probe (1 = dead)
            self.rec.probe(f"act/dead/{name}", mask, module=name, example="validation forward",
                           kind="dead units")

    @contextlib.contextmanager
    def validation(self):
        """``with watch.validation(): ...`` — eval mode and no_grad for the block; the activation
        statistics of the forwards inside it are recorded when it ends."""
        import torch

        was_training = self.model.training
        self.model.eval()
        start = time.perf_counter()
        try:
            with torch.no_grad():
                yield
        finally:
            self.model.train(was_training)
            self._eval_started = None
            self._eval_time += time.perf_counter() - start
            self.flush_activations()

    def capture(self, example, modules, name: str = "features", example_name: str | None = None) -> dict:
        """Run ``model(example)`` in eval mode without gradients and record the outputs of
        ``modules`` as array probes ``{name}/{module}`` identified by module and example.
        Returns the captured arrays."""
        import torch

        named = dict(self.model.named_modules())
        missing = [m for m in modules if m not in named]
        if missing:
            raise KeyError(f"capture(): the model has no module(s) {missing}")
        captured = {}
        handles = [named[m].register_forward_hook(
            lambda mod, a, out, m=m: captured.__setitem__(m, to_host(out, m))) for m in modules]
        was_training = self.model.training
        start = time.perf_counter()
        stats = {k: (s.count, s.zeros, s.sum, s.sumsq, s.alive) for k, s in self._stats.items()}
        try:
            self.model.eval()
            with torch.no_grad():
                self.model(example)
        finally:
            self.model.train(was_training)
            for h in handles:
                h.remove()
            for k, (c, z, s1, s2, alive) in stats.items():  # a probe forward is not a validation forward
                st = self._stats[k]
                st.count, st.zeros, st.sum, st.sumsq, st.alive = c, z, s1, s2, alive
            self._eval_started = None
            self._eval_time += time.perf_counter() - start  # a probe forward is not data wait
        for m, a in captured.items():
            self.rec.probe(f"{name}/{m}", a, module=m, example=example_name, kind=name)
        return captured

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def watch(model, optimizer, recorder: Recorder, **options) -> Watcher:
    """Install recording hooks on ``model`` and ``optimizer``; see :class:`Watcher` for options."""
    return Watcher(model, optimizer, recorder, **options)
