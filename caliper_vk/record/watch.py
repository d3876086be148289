"""``watch(model, optimizer, recorder)``: record what a training loop does, through hooks.

Like ``wandb.watch``, it installs hooks and leaves the loop as it is:

- an optimizer **pre-step** hook measures what the update is about to use:
  the L2 norm of every named parameter's gradient and the global norm (all
  entries of all gradients), the learning rate of each parameter group, and,
  when a clipping cap is given, whether this step's norm reached it. When the
  step is given a closure (``optimizer.step(closure)``: Lightning, L-BFGS), the
  gradients do not exist yet at that hook: it hands the step a closure that calls
  the caller's and measures once it has returned (at its first evaluation only;
  its loss passes through), so the norms are always of the gradients the step uses;
- an optimizer **post-step** hook advances the step and measures the result:
  per-parameter and global weight norms, the update-to-weight ratio
  ``‖θ_k − θ_{k−1}‖ / max(‖θ_k‖, ε)``, throughput and the timing split, memory,
  and (every ``histograms_every`` steps) weight histograms;
- a model wrapped in ``DistributedDataParallel``, FSDP1's ``FullyShardedDataParallel`` or
  compiled with ``torch.compile`` is watched through the module it wraps (``model.module`` /
  ``model._orig_mod``), so parameter and module names are the original's (FSDP1's and
  activation checkpointing's ``_fsdp_wrapped_module.`` / ``_checkpoint_wrapped_module.`` are
  left out of the names);
- a sharded model (FSDP2's ``fully_shard``: DTensor parameters; FSDP1) has its norms summed
  across the ranks its parameters are split over (:mod:`.shards`): every rank calls ``watch``
  (the ones that record nothing with ``recorder=None``), and the recorded norms are the whole
  parameters', not one shard's;
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

Cost (``docs/integrations.md``): every statistic is computed on the model's
device in a few fused calls, with no copy of the model and no float64 copy of
any tensor (:mod:`.devstats`), and reaches the host without the training
stream waiting for it (:mod:`.stage`): a step's values are written when they
have arrived, normally during the next step. Update ratios come from the
optimizer's own state (SGD, Adam, AdamW); another optimizer's are measured
every ``update_ratio_every`` steps from a copy of the parameters taken just
before that step (in their own dtype: a bf16 copy would round each weight by
up to 0.4%, more than the update being measured). The time the hooks take on
the training thread is kept within ``budget`` (:class:`RecordBudget`): over it,
update ratios and histograms thin out to a longer interval, recorded as
``record/expensive_every`` and said on stderr; scalars are always recorded.
"""

from __future__ import annotations

import contextlib
import os
import time

from .._arrays import to_host
from .._log import logger
from . import devstats
from .devstats import ActivationStats, unit_axis  # noqa: F401 (unit_axis: watch.unit_axis)
from .recorder import Recorder
from .shards import TOGETHER_WAIT_S, Unrecorded, local, sharding
from .thinning import RecordBudget
from .watchstage import EPS, StepRecords  # noqa: F401 (EPS: watch.EPS)
from .wrappers import WRAPPER_NAMES, _closure_of, _eager, clean_name, unwrap  # noqa: F401 (watch.unwrap, ...)

UPDATE_RATIO_EVERY = 100  # steps between snapshots, for optimizers whose update state is unknown


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


class Watcher(StepRecords):
    """The hooks ``watch`` installs; ``remove()`` takes them out again.

    ``budget``: the share of the training loop's time the hooks may take ("auto": the session's
    budget when ``session`` is given, else 5% or ``CALIPER_VK_BUDGET``; None: no limit);
    ``session``: a live session whose overhead budget also counts the hooks' time and the
    recorder's ``log`` calls (once each), and leaves the expensive records what the frames'
    floor and the rest of Caliper's work leave (:mod:`.thinning`).
    ``recorder``: None on a rank of a job that records nothing: the hooks still measure there
    when the model is sharded (its shards' norms are part of every rank's sums).
    ``update_ratio_every``: for an optimizer whose update :mod:`.devstats` cannot read (not SGD,
    Adam, AdamW), the interval of the snapshots the update ratio is measured from."""

    def __init__(self, model, optimizer, recorder: Recorder | None, clip: float | None = None,
                 histograms_every: int | None = 100, histogram_bins: int = 12, histogram_range=(-3.0, 3.0),
                 activations=(), update_ratio: bool = True, memory: bool = True, budget="auto",
                 session=None, update_ratio_every: int = UPDATE_RATIO_EVERY):
        self.wrapped = model
        model = unwrap(model)  # DDP / FSDP1 / torch.compile: the hooks go on the original module
        recorder = recorder if recorder is not None else Unrecorded()
        self.model, self.optimizer, self.rec = model, optimizer, recorder
        self.clip = clip
        self.histograms_every = histograms_every
        self.bins, self.range = histogram_bins, histogram_range
        self.update_ratio = update_ratio
        self.memory = memory
        self.session = session
        self.names = {id(p): clean_name(n) for n, p in model.named_parameters()}
        self.shards = sharding(self.wrapped, [p for p, _ in self._params()])
        self.reduced = self.shards is not None and self.shards.group is not None  # sums across ranks
        per_shard = "" if self.shards is None or self.reduced else f"; per shard ({self.shards.note})"
        if per_shard:
            logger.warning(f"watch: the norms are per shard, not of whole parameters: {self.shards.note}")
        self.source = devstats.update_source(optimizer) if update_ratio else None
        if budget == "auto":
            from ..live.budget import default_share

            budget = session.budget.share if session is not None else default_share()
        self.budget = RecordBudget(budget, least=1 if self.source else max(int(update_ratio_every), 1),
                                   frames=None if session is None else session.budget)  # one budget
        if session is not None and isinstance(recorder, Recorder) and recorder.budget is None:
            recorder.budget = session.budget  # the loop's own rec.log calls count too
        self._before: dict[int, object] = {}
        self._handles = []
        self._preclip = None
        self._grad_has: list[bool] = []  # (sharded) which parameters had a gradient on this rank
        self._pending: tuple = ()
        self._measured = False  # this step's gradients measured (before its update)
        self._hook_time = 0.0
        self._owed = None  # (with a session) the step's hooks' span by the budget's clock, to be charged
        self._last_end = None
        self._forward_start = None
        self._batch = 0
        self._examples = 0
        self._eval_time = 0.0
        self._eval_started = None
        self._modules = {}
        self._stats: dict[str, ActivationStats] = {}
        self._pending_stats = False
        self._told = False
        modules = {clean_name(n): m for n, m in model.named_modules()}
        for name in activations:
            if name not in modules:
                raise KeyError(f"watch(activations=...): the model has no module {name!r}; its modules are "
                               f"{', '.join(n for n in modules if n)[:400]}")
            self._stats[name] = ActivationStats()
            self._handles.append(modules[name].register_forward_hook(_eager(self._activation_hook(name))))
        self._handles.append(optimizer.register_step_pre_hook(self._charged(self._pre_step)))
        self._handles.append(optimizer.register_step_post_hook(self._charged(self._post_step)))
        self._handles.append(model.register_forward_pre_hook(_eager(self._forward_pre)))
        if clip is not None:
            recorder.define("clip/threshold", description="gradient-norm clipping cap given to watch()")
            recorder.define("clip/hit", description="1 when this step's global gradient norm reached the cap")
        whole = (f" (summed over the {self.shards.size} ranks the parameters are sharded across)"
                 if self.reduced else per_shard)
        recorder.define("grad_norm/global", description="L2 norm of all gradient entries, as the optimizer "
                        f"received them (after any clipping){whole}")
        if update_ratio:
            how = ("the update the optimizer computed, from its state" if self.source else
                   f"measured every {self.budget.least} steps from a copy of the parameters")
            if self.reduced:
                how += "; recorded at the steps every rank measured"
            recorder.define("update_ratio/global",
                            description=f"||theta_k - theta_(k-1)|| / max(||theta_k||, 1e-12); {how}"
                            + per_shard)
        recorder.define("record/expensive_every", unit="steps",
                        description="interval of the update ratios and weight histograms, lengthened when "
                        "recording them every step would take more than the recording budget")
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
    def _charged(self, hook):
        """``hook`` as installed: with a session, the rec.log calls inside it are not counted by
        themselves (the hook's own time, counted at the end of the step, holds them)."""
        if self.session is None:
            return hook
        budget = self.session.budget

        def charged(*args):
            with budget.charging(count=False):
                result = hook(*args)
            if self._owed is not None:  # the step's hooks, counted once they have all returned
                budget.charge(*self._owed)
                self._owed = None
            return result
        return charged

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
        started = time.perf_counter()
        self.rec.poll()  # write the values of earlier steps that have arrived
        self._pending, self._measured, self._hook_time = (), False, 0.0
        closure, where = _closure_of(optimizer, args, kwargs)
        if closure is None:  # backward has run: the gradients are the ones this step uses
            self._hook_time = time.perf_counter() - started
            self._measure(optimizer)
            return None
        # opt.step(closure) (Lightning, L-BFGS): forward and backward run inside the step, after this
        # hook; the gradients it uses exist once the closure has returned, so measure them there
        watcher = self

        def closure_then_measure(*a, **k):
            loss = closure(*a, **k)
            if not watcher._measured:  # the first evaluation: the gradient the step starts from
                watcher._measure(optimizer)
            return loss

        if where == "closure":
            kwargs = {**kwargs, "closure": closure_then_measure}
        else:
            args = (*args[:where], closure_then_measure, *args[where + 1:])
        self._hook_time = time.perf_counter() - started
        return args, kwargs

    def _measure(self, optimizer, before_update: bool = True):
        """Measure the gradients the step uses (and, for an optimizer whose update state is unknown,
        copy the parameters the update ratio is measured from): called just before the update, once
        per step: from the pre-step hook, or after the step's closure has returned."""
        import torch

        started = time.perf_counter()
        self._measured = True
        with torch.no_grad():
            if self.reduced:  # every watched parameter, in one layout on every rank (a shard may have no grad)
                params = list(self._params())
                self._grad_has = [p.grad is not None for p, _ in params]
                grads = devstats.norms([p.grad if p.grad is not None else local(p).new_zeros(0)
                                        for p, _ in params])
            else:
                params = [(p, name) for p, name in self._params() if p.grad is not None]
                grads = devstats.norms([p.grad for p, _ in params])
            coming = self.rec.step + 1
            if before_update and self.update_ratio and self.source is None and self.budget.due(coming):
                # no known update state: this step's ratio from a copy (its own dtype), on an interval
                self._before = {id(p): p.detach().clone() for p, _ in params}
        host = {}
        for i, group in enumerate(optimizer.param_groups):
            host[f"lr/{group.get('name', f'group{i}')}"] = float(group["lr"])  # a CPU value: no wait
        device = {}
        if grads is not None:
            device.update({f"grad_norm/{name}": (grads, i) for i, (_, name) in enumerate(params)})
        if self.clip is not None:
            host["clip/threshold"] = float(self.clip)
            seen = self._preclip if self._preclip is not None else (  # (sharded: from the sums, on the host)
                devstats.global_norm(grads) if grads is not None and not self.reduced else None)
            if seen is not None:
                device["clip/hit"] = ((seen >= self.clip * (1 - 1e-5)).float(), None)
            if self._preclip is not None:
                device["grad_norm/global_preclip"] = (self._preclip.float(), None)
        self._preclip = None
        self._pending = ([name for _, name in params], host, device)
        self._hook_time += time.perf_counter() - started

    def _post_step(self, optimizer, args, kwargs):
        import torch

        now = time.perf_counter()
        if not self._measured:  # a closure the optimizer never called: the gradients as they are now
            self._measure(optimizer, before_update=False)  # (its time is in _hook_time)
            now = time.perf_counter()
        step = self.rec.advance(examples=self._examples or None)  # (the epoch by examples: train_size=)
        grad_names, host, device = self._pending or ([], {}, {})
        self._pending = ()
        expensive = self.update_ratio and self.budget.due(step)
        with torch.no_grad():
            params = list(self._params())
            weights = devstats.norms([p for p, _ in params])
            cheap_done = time.perf_counter()
            deltas = None  # the expensive part: the update norms
            if expensive:
                if self.source is not None:
                    deltas = devstats.update_norms(optimizer, [p for p, _ in params], self.source)
                elif self._before:
                    deltas = [None if (b := self._before.get(id(p))) is None else
                              devstats._combination_norm([(1.0, p), (-1.0, b)]) for p, _ in params]
                self._before = {}
        deltas_done = time.perf_counter()
        weight_names = [name for _, name in params]
        moved = [i for i, d in enumerate(deltas or ()) if d is not None]
        if self._forward_start is not None:
            host["time/compute_ms"] = (now - self._forward_start) * 1e3
            if self._last_end is not None:
                wait = self._forward_start - self._last_end - self._eval_time
                host["time/wait_ms"] = max(wait, 0.0) * 1e3
                span = now - self._last_end - self._eval_time
                if span > 0:
                    host["throughput/examples_per_s"] = self._examples / span
        if self.memory:
            rss = _rss_bytes()
            if rss is not None:
                host["memory/rss_bytes"] = rss
            mem = self._device_memory()
            if mem is not None:
                host[mem[0]] = mem[1]
        if self.reduced:  # the shards' squares, summed across ranks, then staged
            self._stage_reduced(step, weight_names, host, device, weights, deltas)
        else:
            self._stage(step, grad_names, host, device, weights, weight_names, deltas, moved)
        self._last_end = time.perf_counter()
        self._forward_start, self._examples, self._eval_time = None, 0, 0.0
        histograms = bool(self.histograms_every) and step % max(self.histograms_every, self.budget.every) == 0
        extra_started = time.perf_counter()
        if self.reduced and self.histograms_every and step % self.histograms_every == 0:
            self._reduced_histograms(step, count=histograms)  # every rank takes part, counted or not
        elif histograms:
            self.histograms()
        end = time.perf_counter()
        extra = (deltas_done - cheap_done) + (end - extra_started)
        cheap = self._hook_time + (end - now) - extra
        self.budget.spent(cheap, extra if (expensive or histograms) else None)
        if self.session is not None:  # the session's budget counts the hooks too (_charged)
            clock = self.session.budget.clock
            ended = clock()
            self._owed = (ended - (self._hook_time + (end - now)), ended)
        if self.budget.stepped():
            self.rec.log({"record/expensive_every": float(self.budget.every)}, step=step)
            label = self.budget.label()
            if label and self.session is not None:
                self.session.message = label  # on the status line
            if label and not self._told:
                self._told = True
                logger.warning(f"{label}; recorded as record/expensive_every")

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
        own = getattr(self.wrapped, "clip_grad_norm_", None)  # FSDP1's root: the norm of the whole shards
        if own is not None:
            total = own(cap, norm_type=norm_type)
        else:
            total = torch.nn.utils.clip_grad_norm_([p for p, _ in self._params()], cap, norm_type=norm_type)
        total = total.detach()
        if hasattr(total, "full_tensor"):  # DTensor gradients (FSDP2): every rank clips together
            total = total.full_tensor()
        self._preclip = total  # read with the step's other values, without waiting
        return total

    def histograms(self, step: int | None = None) -> None:
        """Record a fixed-bin histogram of every watched parameter now (of a sharded model: every
        rank calls it, and the counts of the shards are summed across ranks)."""
        if self.reduced:
            self._reduced_histograms(step)
            return
        named = {f"weights/{name}": local(p).detach() for p, name in self._params()}  # (per shard: its own)
        self.rec.histograms(named, bins=self.bins, value_range=self.range, step=step)

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

    def capture(self, example, modules, name: str = "features", example_name: str | None = None,
                wait_s: float | None = None) -> dict:
        """Run ``model(example)`` in eval mode without gradients and record the outputs of
        ``modules`` as array probes ``{name}/{module}`` identified by module and example.
        Returns the captured arrays.

        On a sharded model (FSDP) the forward gathers the parameters from every rank, so every
        rank must call ``capture`` at the same point (the ranks that record nothing too): a rank
        that calls it alone raises, after waiting ``wait_s`` seconds (default
        ``TOGETHER_WAIT_S``, 60) for the others, instead of hanging in the gather."""
        import torch

        named = dict(self.model.named_modules())
        missing = [m for m in modules if m not in named]
        if missing:
            raise KeyError(f"capture(): the model has no module(s) {missing}")
        target = self.model
        if self.shards is not None:  # every rank runs the forward, through the sharding wrapper (FSDP1's root)
            self.shards.together("watch.capture()", TOGETHER_WAIT_S if wait_s is None else wait_s)
            target = self.wrapped
        captured = {}
        handles = [named[m].register_forward_hook(
            lambda mod, a, out, m=m: captured.__setitem__(m, to_host(out, m))) for m in modules]
        was_training = target.training, self.model.training
        start = time.perf_counter()
        stats = {k: (s.count, s.zeros, s.sum, s.sumsq, s.alive) for k, s in self._stats.items()}
        try:
            target.eval()
            with torch.no_grad():
                target(example)
        finally:
            target.train(was_training[0])
            self.model.train(was_training[1])
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


def watch(model, optimizer, recorder: Recorder | None, **options) -> Watcher:
    """Install recording hooks on ``model`` and ``optimizer``; see :class:`Watcher` for options
    (``recorder=None``: a rank of a sharded job that records nothing but takes part in the sums)."""
    return Watcher(model, optimizer, recorder, **options)
