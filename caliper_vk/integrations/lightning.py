"""``CaliperCallback`` for PyTorch Lightning: Caliper in one line of a ``Trainer``.

>>> from caliper_vk.integrations.lightning import CaliperCallback    # doctest: +SKIP
>>> trainer = L.Trainer(callbacks=[CaliperCallback(outputs=["encoder.1"], run_dir="runs/mnist")])

After every optimizer step the callback draws (when a frame is due within the
session's overhead budget) from one probe forward of the module on the first
example of the first training batch, steps the session, and records the run:
``watch``'s norms, learning rates and timing, the loss each ``training_step``
returns, the metrics the module logs (``self.log``) at the end of each
validation, and every ``record_every`` steps the probe arrays. Works with the
``lightning`` package (``lightning.pytorch``) and with ``pytorch-lightning``.
"""

from __future__ import annotations

import sys

from ..live.budget import DEFAULT_BUDGET
from ._probes import Probes, first_tensor

def _callback_base():
    """Lightning's ``Callback`` from the package the user's ``Trainer`` comes from: the one already
    imported (a Trainer accepts only its own package's callbacks), else whichever is installed."""
    import importlib

    order = ("lightning.pytorch", "pytorch_lightning")
    if "lightning.pytorch" not in sys.modules and "pytorch_lightning" in sys.modules:
        order = order[::-1]
    for name in order:
        try:
            return importlib.import_module(name + ".callbacks").Callback
        except ImportError:
            continue
    raise ImportError("caliper_vk.integrations.lightning needs PyTorch Lightning: "
                      "pip install 'caliper-vk[lightning]' (or lightning / pytorch-lightning)")


Callback = _callback_base()


class _LightningProbes(Probes):
    def __init__(self, attention=(), forward=None, **options):
        self._attention = list(attention or ())
        self._forward = forward
        super().__init__(**options)

    @property
    def attention_modules(self) -> list[str]:
        return self._attention

    def forward(self, model, example):
        if self._forward is not None:
            return self._forward(model, example)
        return super().forward(model, example)

    def install_hooks(self, modules: dict) -> list:
        """Besides the output hooks: each named ``nn.MultiheadAttention`` is asked for its weights in
        the probe forward (``need_weights=True``, per head), whatever the model's own call asks
        (``need_weights=False`` is its fast path); the training forward is never touched."""
        import torch

        hooks = super().install_hooks(modules)
        for name in self._attention:
            if isinstance(modules[name], torch.nn.MultiheadAttention):
                hooks.append(modules[name].register_forward_pre_hook(_ask_for_weights, with_kwargs=True))
        return hooks

    def attention_maps(self, out) -> dict:
        # nn.MultiheadAttention returns (output, weights): the weights are the map
        maps = {}
        for name in self._attention:
            got = self._captured.get(name)
            w = got[1] if isinstance(got, (list, tuple)) and len(got) > 1 else first_tensor(got)
            maps[name] = (w, "", f"attention module {name!r} returned no weights in the probe forward "
                                 "(a module returning (output, weights) is needed)")
        return maps


def _ask_for_weights(module, args, kwargs):
    """``nn.MultiheadAttention.forward(query, key, value, key_padding_mask, need_weights, attn_mask,
    average_attn_weights, is_causal)``: weights on, per head unless the caller asked for them."""
    args, kwargs = list(args), dict(kwargs)
    asked = args[4] if len(args) > 4 else kwargs.get("need_weights", True)
    if len(args) > 4:
        args[4] = True
    else:
        kwargs["need_weights"] = True
    if not asked:
        if len(args) > 6:
            args[6] = False
        else:
            kwargs["average_attn_weights"] = False
    return tuple(args), kwargs


class CaliperCallback(Callback):
    """Draw and record a LightningModule while it trains.

    Parameters
    ----------
    outputs : list of str
        Names of submodules (``dict(module.named_modules())``) whose outputs are drawn as
        heatmaps, from a probe forward on the first training example.
    attention : list of str
        Names of attention submodules returning ``(output, weights)`` (``nn.MultiheadAttention``);
        their weights are drawn (one tile per head when they are per head).
    embeddings : str, optional
        An ``nn.Embedding`` (its weight rows) or any submodule (its output rows), drawn as a 3-D
        point cloud along fixed principal axes.
    run_dir : path, optional
        Record the run here; open it with ``caliper view run_dir``.
    session : caliper_vk.Session, optional
        Draw into this session; by default one is made: a window when a display is available,
        else offscreen (PNG frames every ``frames_every`` steps into ``run_dir/frames``).
    budget : float or None
        The share of the training loop Caliper may take (5% by default), for the session made here.
    record_every : int
        Record the probe arrays into the run every this many steps (0: never).
    forward : callable, optional
        ``forward(module, example)`` for the probe forward; default ``module(example)``.
    example : tensor or dict, optional
        The probe input; default the first example of the first training batch.
    watch_options : dict
        Passed to :func:`caliper_vk.watch` (``clip=``, ``histograms_every=``, ...).
    """

    def __init__(self, outputs=(), attention=(), embeddings=None, run_dir=None, session=None,
                 budget=DEFAULT_BUDGET, window=None, size=(1280, 800), frames_every=0, record_every=50,
                 forward=None, example=None, watch_options=None, config=None, overwrite=False, limits=None):
        super().__init__()
        self.probes = _LightningProbes(
            attention=attention, forward=forward, outputs=outputs, embeddings=embeddings, run_dir=run_dir,
            session=session, budget=budget, window=window, size=size, frames_every=frames_every,
            record_every=record_every, watch_options=watch_options, config=config, overwrite=overwrite,
            example=example, name="CaliperCallback", limits=limits)
        self._last_step = None

    @property
    def session(self):
        return self.probes.session

    @property
    def recorder(self):
        return self.probes.rec

    def on_train_start(self, trainer, pl_module):
        if not trainer.optimizers:
            raise ValueError("CaliperCallback: the trainer has no optimizer (configure_optimizers)")
        config = self.probes.config
        if config is None:
            self.probes.config = {k: v for k, v in dict(getattr(pl_module, "hparams", {}) or {}).items()
                                  if isinstance(v, (int, float, str, bool))}
        wrapped = trainer.model  # FSDP1 wraps the module from outside: watch must see that root
        fsdp1 = type(wrapped).__name__ == "FullyShardedDataParallel"
        self.probes.start(pl_module, trainer.optimizers[0], wrapped=wrapped if fsdp1 else None)
        self._last_step = trainer.global_step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.probes.saw_batch(batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if step == self._last_step:
            return  # accumulating gradients: no optimizer step yet
        self._last_step = step
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None:
            self.probes.log({"train/loss": loss})
        self.probes.after_step(step)

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking or not self.probes._started:
            return
        self.probes.log({k: v for k, v in trainer.callback_metrics.items() if not k.startswith("train")})

    def on_train_end(self, trainer, pl_module):
        self.probes.close()

    def on_exception(self, trainer, pl_module, exception):
        self.probes.close("interrupted" if isinstance(exception, KeyboardInterrupt) else "failed")
