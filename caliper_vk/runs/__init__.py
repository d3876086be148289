"""Example runs: real training scripts, their bundled recordings, and one command to regenerate them.

``python -m caliper_vk.runs`` trains every example below with fixed seeds on
the CPU and writes ``examples/<name>/run.json`` (and, for two of them, a few
parameter snapshots) — the files ``caliper view`` opens when given no run
(:func:`example_paths`). All of them together take well under a minute on
two cores.

===================== ================================================================
``digits_mlp``        MLP on the 8x8 digits; ``relu1``/``relu2`` activation statistics,
                      dead units and hidden-state probes; 4 snapshots
``digits_cnn``        small CNN; kernels and feature maps of a fixed digit; two named
                      parameter groups (head rate 5x) with a step schedule; 3 snapshots
``reverse_transformer`` 2-block, 2-head transformer reversing 8-letter strings; attention
                      probes per layer and head; gradient clipping; warm-up + cosine
``sweep_lr1e-5``      the digits MLP at learning rate 1e-5: hardly moves
``sweep_width2``      the digits MLP 2 units wide: improves, slowly
``sweep_width256_n40`` 256 units wide on 40 training examples: validation loss rises
                      above its best while training loss falls
``sweep_lr1``         learning rate 1: loss spikes into the hundreds, units die, and
                      the run still ends complete with every value finite
``super_resolution``  x2 ESPCN-style upscaler on generated images: PSNR and SSIM per epoch
                      beside the bicubic baseline's, on the same panels; image probes
``finetune_from_mlp`` ``digits_mlp`` continued from its epoch-5 snapshot at rate 1e-3 for 5
                      epochs (``parent=``: drawn on the parent's step axis from step 115)
``scratch_lr1e-3``    the same MLP and rate from scratch, 10 epochs: the comparison
``loss_switch``       the digits MLP whose loss switches to label smoothing 0.2 after
                      epoch 5 (``Recorder.event``: marked on every panel)
===================== ================================================================

Snapshots: the bundled runs keep their ``rec.save`` files (``snapshots/*.pt``,
state dicts of 4-16 KB each), because a snapshot record must name a file that
exists (and ``finetune_from_mlp`` starts from one of ``digits_mlp``'s: regenerate
``digits_mlp`` first); the sweep, the transformer, the super-resolution run and the
later three save none. Everything
else of a run is in its ``run.json`` and the sidecar it names (``run-<token>.bin``, the
arrays; runs recorded before the sidecar existed hold them in the JSON); the crash-safe
``log.jsonl`` it was exported from is deleted (see :func:`.common.scrub`, which also
removes host names and paths).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"


@dataclass(frozen=True)
class Example:
    """One bundled run: ``train(out_dir, name=, stop_after=, on_step=)`` records it."""

    name: str
    train: Callable[..., Path]
    summary: str


# The training scripts import torch: they load when a run is trained, so listing and viewing the
# bundled runs (caliper view) needs no torch.
def _script(module: str) -> Callable[..., Path]:
    return lambda out_dir, **kw: import_module(f".{module}", __name__).train(out_dir, **kw)


def _mlp(config: str) -> Callable[..., Path]:
    """The digits MLP trained with ``digits_mlp.MAIN`` or the sweep's configuration ``config``."""
    def train(out_dir, **kw):
        digits_mlp = import_module(".digits_mlp", __name__)
        cfg = digits_mlp.MAIN if config == "MAIN" else {**digits_mlp.SWEEP, **digits_mlp.LATER}[config]
        return digits_mlp.train(out_dir, cfg, **kw)
    return train


SWEEP_NAMES = ("sweep_lr1e-5", "sweep_width2", "sweep_width256_n40", "sweep_lr1")  # digits_mlp.SWEEP's keys
LATER_NAMES = ("finetune_from_mlp", "scratch_lr1e-3", "loss_switch")  # digits_mlp.LATER's keys

EXAMPLES: dict[str, Example] = {e.name: e for e in [
    Example("digits_mlp", _mlp("MAIN"), "digits MLP, relu1/relu2 probes"),
    Example("digits_cnn", _script("digits_cnn"), "digits CNN, kernels and feature maps"),
    Example("reverse_transformer", _script("reverse_transformer"),
            "string reversal, attention probes, clipping"),
    *(Example(name, _mlp(name), summary) for name, summary in zip(SWEEP_NAMES, [
        "sweep: learning rate 1e-5", "sweep: width 2", "sweep: width 256 on 40 examples",
        "sweep: learning rate 1"], strict=True)),
    Example("super_resolution", _script("super_resolution"), "x2 super-resolution, PSNR/SSIM against bicubic"),
    *(Example(name, _mlp(name), summary) for name, summary in zip(LATER_NAMES, [
        "fine-tune of digits_mlp from its epoch-5 snapshot (lineage)", "the fine-tune's rate from scratch",
        "loss switched to label smoothing after epoch 5 (an event)"], strict=True)),
]}


def example_paths(directory=None) -> list[Path]:
    """The ``run.json`` of every bundled example run, in the order of :data:`EXAMPLES`.

    Raises ``FileNotFoundError`` naming the missing runs (an install without its
    package data, or a checkout where they were deleted) and the command that
    regenerates them.
    """
    root = Path(directory) if directory is not None else EXAMPLES_DIR
    paths = [root / name / "run.json" for name in EXAMPLES]
    missing = [p.parent.name for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"example runs {', '.join(missing)} are missing from {root}; regenerate them "
                                f"with: python -m caliper_vk.runs")
    return paths


__all__ = ["EXAMPLES", "EXAMPLES_DIR", "Example", "example_paths"]
