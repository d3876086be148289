"""What a framework callback draws and records, independent of the framework.

:class:`Probes` holds the live session (made here unless one is given), the
panels, the run's ``Recorder`` and ``watch``. A callback tells it three things:
training starts (the model and the optimizer), a batch was seen (the first one
gives the fixed probe example), and an optimizer step ended. After each
optimizer step:

1. ``session.due(step)``: when a frame is due (within the overhead budget), or
   the probes are to be recorded, one probe forward on the fixed example (its
   token sequence cut to ``limits.tokens``) — eval mode, no gradients — with
   forward hooks on the named modules installed for it and removed after it; the
   training forward is never touched. Each probe array is cut to the bounds of
   :class:`~._bounds.Limits` on the model's device and written there into a panel
   allocated with ``caliper_vk.empty(..., device=<the array's device>)``: the
   renderer reads it in place (zero-copy on CUDA, Apple and host-pointer CPU), and
   nothing crosses to the host per frame. Everything this does on the training
   thread counts in the budget.
2. ``session.step(step)`` (in a job: the gather's step, see :mod:`._job`).
3. Every ``record_every`` steps the probe arrays are also recorded into the run
   (``rec.probe``: the one host copy, at recorded steps only, made without waiting
   and written when it has arrived), with the same example, so recorded frames are
   comparable across steps.

Each probe fails alone: an error in one (a module that returned no tensor, an
attention module without weights) is shown on its own panel (its title, or a
text panel in its place before it ever drew) and on the status line; the others
keep drawing. A probe forward that runs out of memory is tried again with half
the tokens; one that fails otherwise is not run again, and the probes that need
no forward (an ``nn.Embedding``'s weight) go on.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import numpy as np

from ..live.budget import DEFAULT_BUDGET
from .._log import logger
from ..record.stage import Staging
from . import _bounds as bounds
from ._batches import _empty, _sharded, _to, first_example, first_tensor, scalars
from ._job import Job, in_job

EXAMPLE = "probe example (the first example of the first training batch)"


class Probes:
    """The shared core of the Lightning and Hugging Face callbacks (see the module docstring).

    Parameters
    ----------
    outputs : list of str
        Module names whose outputs are drawn as heatmaps (first example).
    embeddings : str, optional
        A module name: an ``nn.Embedding``'s weight rows, or any module's output rows, drawn as a
        3-D point cloud along three principal axes of the first frame (kept fixed, so the cloud
        moves when the embedding does), at most ``limits.rows`` rows.
    run_dir : path, optional
        Record the run here (``Recorder`` + ``watch``): metrics, probes, norms. In a job, by the
        rendering rank only.
    session : Session, optional
        Draw into this session; by default one is made (a window when a display is available,
        else offscreen, PNG frames every ``frames_every`` steps into ``frames_dir``).
    limits : Limits or dict, optional
        The bounds of the probes (:class:`~._bounds.Limits`: layers, heads, tokens, rows, features).
    """

    def __init__(self, outputs=(), embeddings=None, run_dir=None, session=None,
                 budget=DEFAULT_BUDGET, window=None, size=(1280, 800), frames_dir=None, frames_every=0,
                 record_every=50, watch_options=None, config=None, overwrite=False, example=None,
                 loss_curve=True, name="caliper", limits=None):
        self.outputs = list(outputs)
        self.embeddings = embeddings
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.session = session
        self._own_session = session is None
        self.session_options = dict(budget=budget, window=window, size=size, frames_dir=frames_dir,
                                    frames_every=frames_every)
        self.record_every = int(record_every or 0)
        self.watch_options = dict(watch_options or {})
        self.config = config
        self.overwrite = overwrite
        self.example = example
        self.loss_curve = loss_curve
        self.name = name
        self.limits = bounds.as_limits(limits)
        self.tokens = self.limits.tokens  # the sequence cut in force: halved after running out of memory
        self.rec = None
        self.watcher = None
        self.job: Job | None = None
        self.panels: dict = {}
        self.buffers: dict = {}
        self.notices: dict = {}  # name -> the text panel shown in place of a probe that never drew
        self.failures: dict = {}  # name -> why its probe failed (the last time it ran)
        self._kinds: dict = {}  # name -> kind of every probe that produced an array
        self.forward_error: str | None = None  # the probe forward failed for good: why
        self.curve = None
        self.losses: list[float] = []
        self._arriving = Staging()  # logged loss tensors on their way to the curve (no wait)
        self._captured: dict = {}
        self._basis = None
        self._rows = None
        self._message = ""  # the status-line message set here (cleared when the failures are gone)
        self._started = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------
    def start(self, model, optimizer, wrapped=None) -> None:
        """Training starts: the session (rendering rank), the recorder (with ``run_dir``, the
        rendering rank), ``watch`` (the rendering rank; every rank when the model is sharded), the
        job's gather (every rank of a job). ``wrapped``: the framework's wrapper around ``model``
        (an FSDP1 root), whose sharding ``watch`` must know."""
        if self._started:
            return
        import caliper_vk as cv

        modules = dict(model.named_modules())
        wanted = [*self.outputs, *([self.embeddings] if self.embeddings else []), *self.attention_modules]
        missing = [m for m in wanted if m not in modules]
        if missing:
            names = ", ".join(n for n in modules if n)
            raise KeyError(f"{self.name}: the model has no module(s) {missing}; its modules are {names[:600]}")
        self.model = model
        rendering = True
        if in_job():
            import torch.distributed as dist

            rendering = dist.get_rank() == 0
        if self.session is None and rendering:
            o = self.session_options
            frames = o["frames_dir"]
            if frames is None and self.run_dir is not None and o["frames_every"]:
                frames = self.run_dir / "frames"
            self.session = cv.Session(window=o["window"], size=o["size"], out_dir=frames,
                                      save_every=o["frames_every"] if frames else 0, budget=o["budget"],
                                      title=f"Caliper · {self.name}")
        elif not rendering and self._own_session is False:
            self.session = None  # a session given on every rank: only the rendering rank's draws
        if self.run_dir is not None and rendering:
            self.rec = cv.Recorder(self.run_dir, config=self.config or {}, overwrite=self.overwrite)
        # watch on the rendering rank; on every rank of a sharded model (its norms are sums of every
        # rank's shards: a collective each step, in which the other ranks take part with recorder=None)
        if self.run_dir is not None and (rendering or (in_job() and _sharded(wrapped or model))):
            opt = getattr(optimizer, "optimizer", optimizer)  # accelerate / Lightning wrappers
            # the hooks' time counts in the session's budget, and their own share follows it
            self.watcher = cv.watch(wrapped or model, opt, self.rec,
                                    **{"session": self.session, **self.watch_options})
        if in_job():
            self.job = Job(session=self.session, recorder=self.rec)
        self._started = True

    @property
    def attention_modules(self) -> list[str]:
        return []

    def close(self, status: str | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        if self.job is not None:
            self.job.close()
        if self.watcher is not None:
            self.watcher.remove()
        if self.rec is not None and not self.rec.closed:
            self.rec.close(status)
        if self.session is not None and self._own_session:
            with contextlib.suppress(Exception):
                self.session.flush()
            logger.info(f"{self.session.status().line()}")
            self.session.close()

    # -- what the callbacks call ---------------------------------------------------------
    def saw_batch(self, batch) -> None:
        if self.example is None:
            try:
                self.example = first_example(batch)
            except Exception as exc:  # never stops training: nothing is drawn, and it says why
                self.example = False
                logger.warning(f"{self.name}: {exc}")

    def log(self, metrics: dict) -> None:
        """Record the trainer's metrics at the current step; keep the loss for the curve."""
        s = self.session
        with contextlib.nullcontext() if s is None else s.budget.charging():  # the training thread's time
            values = scalars(metrics)
            loss = values.get("train/loss")
            if loss is not None and self.loss_curve:  # the curve's point when the value has arrived
                self._arriving.put(loss.reshape(1).float() if hasattr(loss, "reshape") else None,
                                   lambda a, v=loss: self._arrived(v if a is None else float(a[0])))
            if self.rec is not None and values:
                self.rec.log(values)  # tensors are copied to the host without waiting (record.stage)

    def _arrived(self, loss: float) -> None:
        if math.isfinite(loss):
            self.losses.append(loss)

    def after_step(self, step: int) -> None:
        """An optimizer step ended: probe (when a frame is due or the probes are recorded), draw,
        step the session (in a job: the gather), record."""
        s, job = self.session, self.job
        if not self._started or (s is None and job is None):
            return
        recording = self.run_dir is not None and self.record_every > 0 and step % self.record_every == 0
        usable = self.example is not None and self.example is not False
        drawing = s is not None and s.due(step)  # (due() counts its own time)
        # the training thread's time, Caliper's (inside a due() span: counted with it)
        with contextlib.nullcontext() if s is None else s.budget.charging():
            if job is not None:  # the same answer on every rank, or a probe forward would mismatch collectives
                drawing, stop = job.decide(drawing, stop=not usable or self.forward_error is not None)
                usable = usable and not stop
            probing = usable and (drawing or recording or (job is not None and not job.attached))
            try:
                if probing:
                    arrays = self._probe()
                    if job is not None and not job.attached:
                        self._attach_job(arrays)
                    if drawing:
                        self._draw(arrays)
                    if recording and self.rec is not None:
                        at = self.rec.step  # written when the copy has arrived (record.stage): no wait
                        for name, (kind, a, _) in arrays.items():
                            self.rec.stage(a, lambda v, name=name, kind=kind: self.rec.probe(
                                f"{kind}/{name}", v, module=name, example=EXAMPLE, kind=kind, step=at))
                elif drawing:
                    self._draw({})  # the loss curve, and the failures so far
            except Exception as exc:  # a probe must never stop training
                self.forward_error = f"{type(exc).__name__}: {exc}"
                logger.warning(f"{self.name}: the probes failed ({self.forward_error}); training continues "
                               "without them")
        if job is not None and job.gathering:
            job.step(step)
        elif s is not None:
            s.step(step)

    # -- the probe forward --------------------------------------------------------------
    def _hook(self, name):
        def hook(module, args, out):
            self._captured[name] = out
        return hook

    def install_hooks(self, modules: dict) -> list:
        """The hooks of one probe forward (removed after it): the named modules' outputs."""
        wanted = [*self.outputs, *([self.embeddings] if self.embeddings else []), *self.attention_modules]
        return [modules[n].register_forward_hook(self._hook(n)) for n in dict.fromkeys(wanted)]

    def forward(self, model, example):
        """Run the probe forward (framework-specific callbacks override it); returns the
        model's output."""
        if isinstance(example, dict):
            return model(**example)
        return model(example)

    def attention_maps(self, out) -> dict:
        """``{name: (tensor or None, note, why)}`` from the probe forward: a map (cut by the caller),
        the layer note (``"layer 3 of 12"``, or ``""``), and why there is none (framework-specific)."""
        return {}

    def _needs_forward(self) -> bool:
        import torch

        if self.outputs or self.attention_modules or getattr(self, "want_attention", False):
            return True
        return bool(self.embeddings) and not isinstance(
            dict(self.model.named_modules())[self.embeddings], torch.nn.Embedding)

    def _run_forward(self):
        import torch

        model = self.model
        device = next((p.device for p in model.parameters()), None)
        example = bounds.cut_tokens(self.example, self.tokens)
        if device is not None:
            example = _to(example, device)
        was_training = model.training
        self._captured = {}
        hooks = self.install_hooks(dict(model.named_modules()))
        try:
            model.eval()
            with torch.no_grad():
                return self.forward(model, example)
        finally:
            for h in hooks:
                h.remove()
            model.train(was_training)

    def _probe(self) -> dict:
        """One probe forward; ``{name: (kind, float32 array on the model's device, cut note)}``.
        A probe that fails is left out and named in :attr:`failures`."""
        out, ran = None, False
        if self.forward_error is None and self._needs_forward():
            try:
                out, ran = self._run_forward(), True
            except Exception as exc:
                self._forward_failed(exc)
        arrays: dict = {}
        if ran:
            seq = bounds.sequence_length(self.example)  # the example's cut leads every forward probe's note
            cut = bounds.span(min(seq, self.tokens), seq, "example tokens") if seq else ""
            for name in self.outputs:
                self._each(arrays, name, "outputs", lambda n=name: self._output(n), cut)
            for name, (a, note, why) in self.attention_maps(out).items():
                if a is None:
                    self._fail(name, why)
                else:
                    self._each(arrays, name, "attention", lambda a=a, note=note: bounds.attention(
                        a, self.limits, note), cut)
        if self.embeddings and (ran or not self._needs_forward() or self._weight_embedding()):
            self._each(arrays, self.embeddings, "embedding", self._embedding)
        self._captured = {}
        return arrays

    def _forward_failed(self, exc: Exception) -> None:
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        if bounds.out_of_memory(exc) and self.tokens > 8 and not (self.job and self.job.attached):
            old, self.tokens = self.tokens, max(8, self.tokens // 2)
            why = f"out of memory at {old} tokens; trying {self.tokens} next ({why})"
        else:
            self.forward_error = f"the probe forward failed ({why}); not run again"
            why = self.forward_error
        for name in [*self.outputs, *self.attention_names()]:
            self._fail(name, why)
        if self.embeddings and not self._weight_embedding():
            self._fail(self.embeddings, why)

    def attention_names(self) -> list[str]:
        """The names of the attention probes known so far (for failure notes)."""
        known = [n for n, kind in self._kinds.items() if kind == "attention"]
        return known or list(self.attention_modules)

    def _each(self, arrays: dict, name: str, kind: str, make, cut: str = "") -> None:
        try:
            a, note = make()
        except Exception as exc:  # this probe only: the others go on
            self._fail(name, f"{type(exc).__name__}: {exc}")
            return
        self.failures.pop(name, None)
        arrays[name] = (kind, a, ", ".join(n for n in (cut, note) if n))
        self._kinds[name] = kind

    def _fail(self, name: str, why: str) -> None:
        if self.failures.get(name) != why:
            logger.warning(f"{self.name}: probe {name!r}: {why}; the other probes go on")
        self.failures[name] = why

    def _output(self, name: str):
        t = first_tensor(self._captured.get(name))
        if t is None:
            raise ValueError(f"module {name!r} produced no tensor in the probe forward")
        return bounds.image(t, self.limits)

    def _weight_embedding(self) -> bool:
        import torch

        return isinstance(dict(self.model.named_modules())[self.embeddings], torch.nn.Embedding)

    def _embedding(self):
        """At most ``limits.rows`` rows (evenly spaced, fixed) of the embedding, centred and
        projected on three principal axes computed once on the device (:func:`._bounds.principal_axes`)."""
        module = dict(self.model.named_modules())[self.embeddings]
        if self._weight_embedding():
            x = module.weight.detach()
            if hasattr(x, "full_tensor"):  # a DTensor shard: every rank probes together, so gather it
                x = x.full_tensor()
        else:
            t = first_tensor(self._captured.get(self.embeddings))
            if t is None:
                raise ValueError(f"module {self.embeddings!r} produced no tensor in the probe forward")
            x = t.detach()
            x = x[0] if x.ndim >= 3 else x
            x = x.reshape(-1, x.shape[-1])
        n = x.shape[0]
        if self._rows is None or self._rows[0] != n or self._rows[1].device != x.device:
            self._rows = (n, bounds.sample_rows(n, self.limits.rows, x))
        x = x[self._rows[1]].float()
        x = x - x.mean(0, keepdim=True)
        if self._basis is None or self._basis.shape[0] != x.shape[1] or self._basis.device != x.device:
            self._basis = bounds.principal_axes(x)
        note = f"{x.shape[0]} of {n} rows" if x.shape[0] < n else ""
        return (x @ self._basis).contiguous(), note

    # -- panels -------------------------------------------------------------------------
    def _view(self, name: str, kind: str, a) -> tuple[str, str, dict]:
        """The panel's title, its view and options for a probe array."""
        if kind == "embedding":
            return f"{name} (principal axes)", "pointcloud", {}
        if kind == "attention" and a.ndim == 3:
            return name, "images", dict(normalize="tile", colormap="magma")
        return name, "heatmap", dict(colormap="magma" if kind == "attention" else "viridis")

    def _attach_job(self, arrays: dict) -> None:
        """The first probe of a job: attach to the gather the probes every rank has, same shapes."""
        import torch

        job = self.job
        common, left = job.agree([(n, k, tuple(a.shape)) for n, (k, a, _) in arrays.items()])
        for name, kind, _ in common:
            _, a, note = arrays[name]
            title, view, options = self._view(name, kind, a)
            if job.is_renderer:
                buf = _empty(a)
            else:  # never Vulkan on a rank that does not draw
                buf = torch.empty(a.shape, dtype=a.dtype, device=a.device)
            buf.copy_(a)
            self.buffers[name] = buf
            self.panels[name] = job.attach(name, title, buf, view, note, **options)
        for name, why in left.items():
            self._fail(name, why)
        job.attached = True

    def _draw(self, arrays: dict) -> None:
        s, job = self.session, self.job
        for name, (kind, a, note) in arrays.items():
            buf = self.buffers.get(name)
            if job is not None:
                if buf is not None and tuple(buf.shape) == tuple(a.shape):
                    buf.copy_(a)  # the gather writes every rank's part under the panel's writing()
                    job.note(name, note)
                continue
            if buf is None or tuple(buf.shape) != tuple(a.shape):
                if name in self.panels:
                    self.panels.pop(name).close()
                if name in self.notices:
                    self.notices.pop(name).close()
                buf = self.buffers[name] = _empty(a)
                buf.copy_(a)
                title, view, options = self._view(name, kind, a)
                self.panels[name] = s.attach(buf, view, name=title, **options)
            else:
                with self.panels[name].writing():
                    buf.copy_(a)
            self.panels[name].note = note
        if s is None:
            return
        self._show_failures(s)
        self._arriving.poll()
        if self.loss_curve and self.losses:
            if self.curve is None:
                from ..views import Curve

                self.curve = Curve(smoothing=0.95)
                s.add(self.curve, name="train/loss (raw + EMA)")
            self.curve.set_data(np.asarray(self.losses, np.float32))

    def _show_failures(self, s) -> None:
        """A failed probe says so on its own panel (its title; a text panel in its place when it
        never drew) and on the status line; a probe that works again clears its note."""
        for name, why in self.failures.items():
            if self.job is not None:
                self.job.note(name, f"probe failed: {why}")
                if name not in self.panels and name not in self.notices and self.job.is_renderer:
                    self.notices[name] = s.add(_notice(name, why), name=name)
            elif name in self.panels:
                self.panels[name].note = f"probe failed: {why}"
            elif name not in self.notices:
                self.notices[name] = s.add(_notice(name, why), name=name)
            elif self.notices[name].view.entries[0][1] != _notice_text(name, why):
                self.notices[name].view.set_text(_notice_text(name, why))
        if self.failures:
            first = next(iter(self.failures))
            more = len(self.failures) - 1
            message = f"probe {first} failed" + (f" (and {more} more)" if more else "")
            if not s.message or s.message == self._message:
                s.message = self._message = message
        elif self._message and s.message == self._message:
            s.message = self._message = ""


def _notice_text(name: str, why: str) -> str:
    return f"{name}: the probe failed.\n{why}"


def _notice(name: str, why: str):
    from ..views.text import Text

    return Text(_notice_text(name, why))
