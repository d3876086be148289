"""``CaliperCallback`` for the Hugging Face ``transformers.Trainer``.

>>> from caliper_vk.integrations.hf import CaliperCallback         # doctest: +SKIP
>>> trainer = Trainer(model, args, train_dataset=ds, callbacks=[CaliperCallback(run_dir="runs/gpt2")])

After every optimizer step (``on_step_end``) the callback draws, when a frame is
due within the session's overhead budget, from one probe forward of the model
on the first example of the first training batch: the attention maps the model
returns with ``output_attentions=True`` (one panel per layer, a tile per head;
a model running SDPA or flash attention returns none, so the probe forward —
only the probe forward — switches it to the eager implementation and back),
the outputs of the named modules, and the token embedding as a point cloud.
It records the run (``watch``'s norms, learning rates and timing, and every
metric the ``Trainer`` logs: ``loss`` → ``train/loss``, ``eval_loss`` →
``val/loss``) and every ``record_every`` steps the probe arrays.
"""

from __future__ import annotations

from ..live.budget import DEFAULT_BUDGET
from . import _bounds as bounds
from ._probes import Probes

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError("caliper_vk.integrations.hf needs transformers: pip install 'caliper-vk[hf]'") from exc

SKIPPED_LOGS = ("epoch", "total_flos", "train_loss", "train_runtime", "train_samples_per_second",
                "train_steps_per_second", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second")


class _HFProbes(Probes):
    def __init__(self, attention=True, **options):
        self.want_attention = bool(attention)
        super().__init__(**options)

    def forward(self, model, example):
        if not self.want_attention:
            return model(**example)
        config = getattr(model, "config", None)
        impl = getattr(config, "_attn_implementation", None)
        switch = impl not in (None, "eager") and hasattr(model, "set_attn_implementation")
        if switch:
            model.set_attn_implementation("eager")  # SDPA and flash attention return no weights
        try:
            return model(**example, output_attentions=True)
        finally:
            if switch:
                model.set_attn_implementation(impl)

    def attention_maps(self, out) -> dict:
        """At most ``limits.layers`` layers (evenly spaced) of the ``attentions`` the model returned."""
        if not self.want_attention:
            return {}
        maps = getattr(out, "attentions", None)
        if not maps:
            return {"attention": (None, "", "the model returned no attentions with output_attentions=True")}
        count = len(maps)
        picked = bounds.layers(count, self.limits)
        return {f"attention/layer{i}": (maps[i], f"layer {i} of {count}" if len(picked) < count else "",
                                        f"layer {i} returned no attention map")
                for i in picked}


class CaliperCallback(TrainerCallback):
    """Draw and record a ``transformers`` model while ``Trainer`` trains it.

    Parameters
    ----------
    attention : bool
        Draw the attention maps the model returns (one panel per layer, a tile per head).
    outputs : list of str
        Module names (``dict(model.named_modules())``, e.g. ``"transformer.h.0.mlp"``) whose
        outputs are drawn as heatmaps.
    embeddings : str, optional
        A module name (``"transformer.wte"``): an ``nn.Embedding``'s weight rows, or a module's
        output rows, drawn as a 3-D point cloud along fixed principal axes.
    run_dir : path, optional
        Record the run here; open it with ``caliper view run_dir``. Default: none (draw only).
    session, budget, window, size, frames_every, record_every, example, watch_options
        As for :class:`caliper_vk.integrations.lightning.CaliperCallback`.
    """

    def __init__(self, attention=True, outputs=(), embeddings=None, run_dir=None, session=None,
                 budget=DEFAULT_BUDGET, window=None, size=(1280, 800), frames_every=0, record_every=50,
                 example=None, watch_options=None, config=None, overwrite=False, limits=None):
        self.probes = _HFProbes(
            attention=attention, outputs=outputs, embeddings=embeddings, run_dir=run_dir, session=session,
            budget=budget, window=window, size=size, frames_every=frames_every, record_every=record_every,
            watch_options=watch_options, config=config, overwrite=overwrite, example=example,
            name="CaliperCallback", limits=limits)
        self._example_hook = None

    @property
    def session(self):
        return self.probes.session

    @property
    def recorder(self):
        return self.probes.rec

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if model is None or optimizer is None:
            raise ValueError("CaliperCallback: the Trainer passed no model or optimizer to on_train_begin")
        if self.probes.config is None:
            self.probes.config = {k: v for k, v in args.to_dict().items()
                                  if isinstance(v, (int, float, str, bool)) and not k.startswith("_")}
        self.probes.start(model, optimizer)
        if self.probes.example is None:
            # the Trainer calls model(**inputs): keep the first example of the first batch
            def remember(module, args_, kwargs_):
                self.probes.saw_batch(dict(kwargs_) if kwargs_ else args_)
                if self._example_hook is not None:
                    self._example_hook.remove()
                    self._example_hook = None

            self._example_hook = model.register_forward_pre_hook(remember, with_kwargs=True)

    def on_step_end(self, args, state, control, **kwargs):
        self.probes.after_step(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and self.probes._started:
            self.probes.log({k: v for k, v in logs.items() if k not in SKIPPED_LOGS})

    def on_train_end(self, args, state, control, **kwargs):
        if self._example_hook is not None:
            self._example_hook.remove()
            self._example_hook = None
        self.probes.close()
