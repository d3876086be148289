"""How ``watch`` gets a step's values to the run: every device value of a step in one vector,
copied to the host without waiting (:mod:`.stage`) and logged when it has arrived; of a sharded
model, the shards' squares summed across ranks first (:mod:`.shards`); the activation statistics
of a validation forward. A mixin of :class:`~caliper_vk.record.watch.Watcher`."""

from __future__ import annotations

import math

from . import devstats
from .shards import local

EPS = 1e-12


class StepRecords:
    """The part of :class:`~caliper_vk.record.watch.Watcher` that stages and logs what its hooks
    measured (it uses the watcher's ``rec``, ``shards``, ``clip``, ``bins``, ``range``, ``_stats``
    and ``_params()``)."""

    def _stage(self, step, grad_names, host, device, weights, weight_names, deltas, moved):
        """Stage one vector of every device value of the step, copied to the host without waiting."""
        import torch

        parts, singles = [], []
        if device:
            vectors = {id(v): v for v, i in device.values() if i is not None}
            parts.extend(vectors.values())
            singles = [k for k, (_, i) in device.items() if i is None]
            parts.extend(device[k][0].reshape(1) for k in singles)
        if weights is not None:
            parts.append(weights)
        if moved:
            parts.append(torch.stack([deltas[i].reshape(()).float() for i in moved]))
        target = parts[0].device if parts else None
        vector = torch.cat([devstats.on(t.float(), target) for t in parts]) if parts else None

        has_weights = weights is not None
        has_grads = any(i is not None for _, i in device.values())

        def write(values):  # (the closure's names are not rebound after this)
            at = 0
            vals = [] if values is None else values.astype(float).tolist()
            grads = None
            if has_grads:
                grads = list(zip(grad_names, vals[at:at + len(grad_names)], strict=True))
                at += len(grad_names)
            got = dict(zip(singles, vals[at:at + len(singles)], strict=True))
            at += len(singles)
            w = d = None
            if has_weights:
                w = list(zip(weight_names, vals[at:at + len(weight_names)], strict=True))
                at += len(weight_names)
                d = list(zip(moved, vals[at:at + len(moved)], strict=True))
            self._log_step(step, host, grads, got, w, d)

        self.rec.stage(vector, write)

    def _log_step(self, step, host, grads, singles, weights, deltas) -> None:
        """Log a step's values once they are on the host: ``grads`` and ``weights`` as
        ``[(name, norm)]`` (None: none measured), ``singles`` ``{metric: value}``, ``deltas``
        ``[(index in weights, update norm)]``, ``host`` the values known on the host."""
        out = {}
        if grads is not None:
            out.update({f"grad_norm/{n}": v for n, v in grads})
            out["grad_norm/global"] = math.sqrt(sum(v * v for _, v in grads))
        out.update((k, v) for k, v in host.items() if k.startswith(("lr/", "clip/")))
        out.update(singles)
        if weights is not None:
            out.update({f"weight_norm/{n}": v for n, v in weights})
            den = math.sqrt(sum(v * v for _, v in weights))
            out["weight_norm/global"] = den
            if deltas:
                out.update({f"update_ratio/{weights[i][0]}": v / max(weights[i][1], EPS) for i, v in deltas})
                out["update_ratio/global"] = math.sqrt(sum(v * v for _, v in deltas)) / max(den, EPS)
        out.update((k, v) for k, v in host.items() if not k.startswith(("lr/", "clip/")))
        self.rec.log(out, step=step)

    def _stage_reduced(self, step, names, host, device, weights, deltas):
        """The sharded step (:mod:`.shards`): one float32 vector in the same layout on every rank
        (per watched parameter: the squares of the gradient's, the weight's and the update's shard
        norms, whether this rank had a gradient and an update; then the values measured whole,
        counted once; then 1 if this rank measured the updates), summed across the ranks with one
        ``all_reduce`` started without waiting, square-rooted on the host when it has arrived."""
        import torch

        n, sh = len(names), self.shards
        if weights is None:  # no parameters (on any rank: the layout is the model's)
            self.rec.stage(None, lambda _: self._log_step(step, host, None, {}, None, None))
            return
        grads = None
        if any(i is not None for _, i in device.values()):
            grads = next(v for v, i in device.values() if i is not None)
        has = self._grad_has if grads is not None else [False] * n
        dev = weights.device
        mask = sh.mask(dev)
        zeros = torch.zeros(n, device=dev)
        grads = zeros if grads is None else devstats.on(grads.float(), dev)
        took = deltas is not None
        d_has = [took and d is not None for d in (deltas or [None] * n)]
        d = zeros if not took else torch.stack([x.reshape(()).float() if x is not None else zeros[0]
                                                for x in deltas])
        singles = [k for k, (_, i) in device.items() if i is None]
        parts = [grads * grads, sh.flags(has, dev), weights * weights, devstats.on(d, dev) ** 2,
                 sh.flags(d_has, dev)]
        parts = [p * mask for p in parts]
        if singles:
            vals = torch.stack([devstats.on(device[k][0].reshape(()).float(), dev) for k in singles])
            parts.append(vals * sh.flags([sh.first], dev))
        parts.append(sh.flags([took], dev))
        vector = torch.cat(parts)
        works = sh.reduce(vector)
        clip, size = self.clip, sh.size

        def write(values):
            v = values.astype(float)
            g2, gh, w2, d2, dh = (v[i * n:(i + 1) * n] for i in range(5))
            got = dict(zip(singles, v[5 * n:5 * n + len(singles)].tolist(), strict=True))
            grads = [(names[i], math.sqrt(max(g2[i], 0.0))) for i in range(n) if gh[i] > 0] or None
            if clip is not None and "clip/hit" not in got and grads is not None:
                got["clip/hit"] = float(math.sqrt(sum(x * x for _, x in grads)) >= clip * (1 - 1e-5))
            every = v[-1] > size - 0.5  # every rank measured the updates
            moved = [(i, math.sqrt(max(d2[i], 0.0))) for i in range(n) if every and dh[i] > 0]
            weights = [(names[i], math.sqrt(max(w2[i], 0.0))) for i in range(n)]
            self._log_step(step, host, grads, got, weights, moved)

        self.rec.stage(vector, write, works)

    def _reduced_histograms(self, step=None, count: bool = True) -> None:
        """Weight histograms of a sharded model: every rank's counts of its shards, summed across
        ranks (:mod:`.shards`); ``count=False``: this rank's budget skips them, it takes part in the
        sum with none, and the step's histograms are not recorded (every rank must have counted)."""
        import torch

        params = list(self._params())
        if not params:
            return
        sh, lo, hi, bins = self.shards, float(self.range[0]), float(self.range[1]), int(self.bins)
        dev = local(params[0][0]).device
        if count:
            counts = torch.stack([devstats.on(devstats.histogram_device(local(p), bins, lo, hi), dev)
                                  for p, _ in params])
            counts = counts * sh.mask(dev, torch.int64)[:, None]
        else:
            counts = torch.zeros((len(params), bins + 4), dtype=torch.int64, device=dev)
        vector = torch.cat([counts.reshape(-1), sh.flags([count], dev, torch.int64)])
        works = sh.reduce(vector)
        step = self.rec.step if step is None else step
        names, size = [name for _, name in params], sh.size

        def write(values):
            if values[-1] < size:
                return  # a rank's budget skipped them: a partial sum is no histogram
            for i, name in enumerate(names):
                h = devstats._counts(values[i * (bins + 4):(i + 1) * (bins + 4)], lo, hi)
                self.rec.histogram_counted(f"weights/{name}", h, step=step)

        self.rec.stage(vector, write, works)

    def flush_activations(self) -> None:
        """Record the activation statistics gathered since the last flush (at the current step),
        once their sums have reached the host (without waiting for them), and which units were
        dead (an array probe per module: 1 = dead)."""
        import torch

        names, sums, stats, masks = [], [], {}, {}
        for name, st in self._stats.items():
            v = st.sums()
            if v is not None:
                names.append(name)
                sums.append(v)
                stats[name] = (st.count, st.alive.numel())
                masks[name] = st.dead_mask()
            st.reset()
        self._pending_stats = False
        if not names:
            return
        step = self.rec.step
        device = sums[0].device

        def write(values):
            out = {}
            for i, name in enumerate(names):
                count, units = stats[name]
                zeros, total, squares, dead = values[4 * i:4 * i + 4].tolist()
                mean = total / count
                out[f"act/std/{name}"] = max(squares / count - mean * mean, 0.0) ** 0.5
                out[f"act/zero_frac/{name}"] = zeros / count
                out[f"act/dead_frac/{name}"] = dead / units
                out[f"act/dead_units/{name}"] = dead
            self.rec.log(out, step=step)

        self.rec.stage(torch.cat([devstats.on(v, device) for v in sums]), write)
        for name, mask in masks.items():  # which units, as an array probe (1 = dead)
            self.rec.stage(mask, lambda m, name=name: self.rec.probe(
                f"act/dead/{name}", m, module=name, example="validation forward", kind="dead units", step=step))
