"""What a framework callback draws and records, independent of the framework.

:class:`Probes` holds the live session (made here unless one is given), the
panels, the forward hooks on the named modules, and the run's ``Recorder`` and
``watch``. A callback tells it three things: training starts (the model and
the optimizer), a batch was seen (the first one gives the fixed probe
example), and an optimizer step ended. After each optimizer step:

1. ``session.due(step)``: when a frame is due (within the overhead budget),
   one probe forward on the fixed example — eval mode, no gradients — with
   hooks on the named modules that are active only during it; their outputs,
   the attention maps and the embedding are written into the panels under
   ``panel.writing()``. The training forward is never touched, so a frame that
   is not drawn costs nothing but the ``due()`` check, and the budget counts
   the probe forward as Caliper's time.
2. ``session.step(step)``.
3. Every ``record_every`` steps the probe arrays are also recorded into the
   run (``rec.probe``), whether or not a frame was drawn, with the same
   example, so recorded frames are comparable across steps.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import numpy as np

from ..live.budget import DEFAULT_BUDGET
from .._log import logger

EXAMPLE = "probe example (the first example of the first training batch)"


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
    """The finite-or-not single numbers among ``metrics`` (tensors of one element, floats, ints)."""
    out = {}
    for k, v in metrics.items():
        if hasattr(v, "numel"):
            if v.numel() != 1:
                continue
            v = float(v.detach().float().cpu().item())
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        out[metric_name(k)] = float(v)
    return out


def as_image(t):
    """A module output as the 2-D array a heatmap draws: the first example, sequences and
    channels flattened into rows (``(1, T, D)`` → ``(T, D)``, ``(1, F)`` → ``(1, F)``)."""
    a = t.detach()
    if a.ndim >= 3:
        a = a[0]
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim > 2:
        a = a.reshape(-1, a.shape[-1])
    return a.float().cpu()


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


class Probes:
    """The shared core of the Lightning and Hugging Face callbacks (see the module docstring).

    Parameters
    ----------
    outputs : list of str
        Module names whose outputs are drawn as heatmaps (first example).
    attention : bool or list of str
        Framework-specific: the callbacks turn it into ``attention_from`` below.
    embeddings : str, optional
        A module name: an ``nn.Embedding``'s weight rows, or any module's output rows, drawn as a
        3-D point cloud along the three principal axes of the first frame (kept fixed, so the
        cloud moves when the embedding does).
    run_dir : path, optional
        Record the run here (``Recorder`` + ``watch``): metrics, probes, norms.
    session : Session, optional
        Draw into this session; by default one is made (a window when a display is available,
        else offscreen, PNG frames every ``frames_every`` steps into ``frames_dir``).
    """

    def __init__(self, outputs=(), embeddings=None, run_dir=None, session=None,
                 budget=DEFAULT_BUDGET, window=None, size=(1280, 800), frames_dir=None, frames_every=0,
                 record_every=50, watch_options=None, config=None, overwrite=False, example=None,
                 loss_curve=True, name="caliper"):
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
        self.rec = None
        self.watcher = None
        self.panels: dict = {}
        self.buffers: dict = {}
        self.curve = None
        self.losses: list[float] = []
        self._hooks = []
        self._captured: dict = {}
        self._active = False
        self._basis = None
        self._started = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------
    def start(self, model, optimizer) -> None:
        """Training starts: the session, the hooks on the named modules, the recorder."""
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
        for name in dict.fromkeys(wanted):
            self._hooks.append(modules[name].register_forward_hook(self._hook(name)))
        if self.session is None:
            o = self.session_options
            frames = o["frames_dir"]
            if frames is None and self.run_dir is not None and o["frames_every"]:
                frames = self.run_dir / "frames"
            self.session = cv.Session(window=o["window"], size=o["size"], out_dir=frames,
                                      save_every=o["frames_every"] if frames else 0, budget=o["budget"],
                                      title=f"Caliper · {self.name}")
        if self.run_dir is not None:
            self.rec = cv.Recorder(self.run_dir, config=self.config or {}, overwrite=self.overwrite)
            opt = getattr(optimizer, "optimizer", optimizer)  # accelerate / Lightning wrappers
            self.watcher = cv.watch(model, opt, self.rec, **self.watch_options)
        self._started = True

    @property
    def attention_modules(self) -> list[str]:
        return []

    def close(self, status: str | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        for h in self._hooks:
            h.remove()
        self._hooks = []
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
        values = scalars(metrics)
        if "train/loss" in values and math.isfinite(values["train/loss"]):
            self.losses.append(values["train/loss"])
        if self.rec is not None and values:
            self.rec.log(values)

    def after_step(self, step: int) -> None:
        """An optimizer step ended: draw (when due), step the session, record the probes."""
        s = self.session
        if s is None or self.example is None or self.example is False:
            return
        record = self.rec is not None and self.record_every > 0 and step % self.record_every == 0
        drawing = s.due(step)
        if drawing or record:
            started = s.budget.clock()
            try:
                arrays = self._probe()
                if drawing:
                    self._draw(arrays)
                if record:
                    for name, (kind, a) in arrays.items():
                        self.rec.probe(f"{kind}/{name}", a.numpy(), module=name, example=EXAMPLE, kind=kind)
            except Exception as exc:  # a probe must never stop training
                logger.warning(f"{self.name}: the probe failed ({type(exc).__name__}: {exc}); "
                               "training continues without it")
                self.example = False
            finally:
                if not drawing:
                    s.budget.charge(started)  # recording outside a due() span is Caliper's time too
        s.step(step)

    # -- the probe forward --------------------------------------------------------------
    def _hook(self, name):
        def hook(module, args, out):
            if self._active:
                self._captured[name] = out
        return hook

    def forward(self, model, example):
        """Run the probe forward (framework-specific callbacks override it); returns the
        model's output."""
        if isinstance(example, dict):
            return model(**example)
        return model(example)

    def attention_maps(self, out) -> dict:
        """``{name: tensor}`` of attention maps from the probe forward (framework-specific)."""
        return {}

    def _probe(self) -> dict:
        """One forward on the fixed example; ``{name: (kind, 2-D or 3-D float32 CPU tensor)}``."""
        import torch

        model = self.model
        was_training = model.training
        self._captured = {}
        self._active = True
        try:
            model.eval()
            with torch.no_grad():
                out = self.forward(model, self.example)
        finally:
            self._active = False
            model.train(was_training)
        arrays = {}
        for name in self.outputs:
            t = first_tensor(self._captured.get(name))
            if t is not None:
                arrays[name] = ("outputs", as_image(t))
        for name, a in self.attention_maps(out).items():
            a = a.detach()[0] if a.ndim == 4 else a.detach()  # (1, H, T, T) → (H, T, T)
            if a.ndim == 3 and a.shape[0] == 1:
                a = a[0]
            arrays[name] = ("attention", a.float().cpu())
        if self.embeddings:
            arrays[self.embeddings] = ("embedding", self._embedding())
        return arrays

    def _embedding(self):
        import torch

        module = dict(self.model.named_modules())[self.embeddings]
        if isinstance(module, torch.nn.Embedding):
            x = module.weight.detach().float().cpu()
        else:
            t = first_tensor(self._captured.get(self.embeddings))
            if t is None:
                raise ValueError(f"module {self.embeddings!r} produced no tensor in the probe forward")
            x = as_image(t)
        x = x - x.mean(0, keepdim=True)
        if self._basis is None or self._basis.shape[0] != x.shape[1]:
            _, _, v = torch.linalg.svd(x, full_matrices=False)
            basis = v[:3].T
            if basis.shape[1] < 3:
                basis = torch.nn.functional.pad(basis, (0, 3 - basis.shape[1]))
            self._basis = basis.contiguous()
        return x @ self._basis

    # -- panels -------------------------------------------------------------------------
    def _draw(self, arrays: dict) -> None:
        import caliper_vk as cv

        s = self.session
        for name, (kind, a) in arrays.items():
            buf = self.buffers.get(name)
            if buf is None or tuple(buf.shape) != tuple(a.shape):
                if name in self.panels:
                    self.panels.pop(name).close()
                buf = self.buffers[name] = cv.empty(tuple(a.shape))
                buf.copy_(a)
                if kind == "embedding":
                    self.panels[name] = s.attach(buf, "pointcloud", name=f"{name} (principal axes)")
                elif kind == "attention" and a.ndim == 3:
                    self.panels[name] = s.attach(buf, "images", name=name, normalize="tile", colormap="magma")
                else:
                    self.panels[name] = s.attach(buf, "heatmap", name=name,
                                                 colormap="magma" if kind == "attention" else "viridis")
                continue
            with self.panels[name].writing():
                buf.copy_(a)
        if self.loss_curve and self.losses:
            if self.curve is None:
                from ..views import Curve

                self.curve = Curve(smoothing=0.95)
                s.add(self.curve, name="train/loss (raw + EMA)")
            self.curve.set_data(np.asarray(self.losses, np.float32))
