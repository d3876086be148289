"""The GPT demo: a character-level transformer learning Shakespeare, watched from inside.

A small GPT (:mod:`caliper_vk.demos.chargpt`: 3 layers, 4 heads, d_model 96,
context 64 by default) trains on Shakespeare's plays (:mod:`.shakespeare`, or
any text with ``--text``). One session shows, every optimizer step:

- **attention**, one panel per layer, a tile per head: the attention
  probabilities of a fixed probe passage (query row, key column; each head's
  colours span its own range, so weak heads stay visible). The probe's
  forward pass writes them into ``caliper_vk.empty`` tensors under
  ``panel.writing()``, so the renderer reads them in place (zero-copy) and
  never sees a half-written step;
- the **logit lens**: for the residual stream after the embedding (L0) and
  after every block (L1..), the final layer norm and the unembedding give a
  next-character distribution at each probe position; the grid shows the top
  character coloured by its probability (a textgrid panel; the values are
  attached in place, the characters set with ``set_tokens``);
- **samples** regenerated every ``sample_every`` steps from a newline, at
  temperature 0.8 with a generator seeded by the step (a host-fed text panel);
- the **loss** curve (raw, with an EMA line over it).

With a display it draws in a window; without one it writes a PNG frame every
``every`` steps and says where.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from ..views import Curve, Text
from . import shakespeare
from ._live import demo_session, hold_window, progress_bar, train_device
from .chargpt import CharData, CharGPT, Config, logit_lens

PROMPT = "\n"


def probe_window(text: str, length: int) -> str:
    """A fixed passage to watch: the first paragraph start after a tenth of the text."""
    at = text.find("\n\n", len(text) // 10)
    start = at + 2 if 0 <= at < len(text) - length - 2 else 0
    return text[start: start + length]


def write_probes(net, probe_ids, attn_panels, attn, lens_panel, lens, vocab) -> None:
    """The probe forward of a drawn frame: every layer's attention of the probe text into its
    panel's tensor, and the logit lens (the top token at each layer and position, over the
    lens tensor's columns) into the text grid."""
    import torch

    n_lens = lens.shape[1]
    net.eval()
    with torch.no_grad():
        _, residuals, attentions = net(probe_ids, trace=True)
        top, ids = logit_lens(net, residuals)
    for panel, buf, a in zip(attn_panels, attn, attentions, strict=True):
        with panel.writing():
            buf.copy_(a[0])
    with lens_panel.writing():
        lens.copy_(top[:, :n_lens])
    lens_panel.view.set_tokens(ids=ids[:, :n_lens].cpu(), vocab=vocab)


def compact(sample: str) -> str:
    """A sample as the panel shows it: runs of blank lines folded into one (samples.txt keeps
    the raw text)."""
    return re.sub(r"\n{3,}", "\n\n", sample.strip("\n"))


def run(out_dir="out/gpt", steps: int = 600, every: int = 5, sample_every: int = 100,
        width: int = 1200, height: int = 860, seed: int = 0, window: bool | None = None,
        progress: bool = True, log=print, text_path=None, text: str | None = None,
        model: dict | None = None, batch: int = 32, lr: float = 3e-3, lens_positions: int = 32,
        sample_chars: int = 200, device: str = "auto") -> dict:
    """Train and draw on ``device`` (auto, cuda, mps, cpu: :func:`train_device`); returns a summary
    (losses, samples, frames, the model and its probe)."""
    import torch

    from .. import empty

    if steps < 1 or every < 1 or sample_every < 1:
        raise ValueError("--steps, --every and --sample-every must be positive")
    dev = train_device(device)
    torch.manual_seed(seed)
    if text is None:
        text, origin = shakespeare.load(text_path, log=log)
    else:
        origin = "the given text"
    data = CharData(text)
    cfg = Config(vocab_size=len(data.vocab), **(model or {}))
    net = CharGPT(cfg).to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    probe = probe_window(text, cfg.context)
    if len(probe) < cfg.context:
        raise ValueError(f"the text has {len(text)} characters; the demo needs more than the "
                         f"context of {cfg.context}")
    probe_ids = data.encode(probe)[None].to(dev)
    n_lens = min(lens_positions, cfg.context)
    prompt = data.encode(PROMPT if PROMPT in data.index else text[0]).to(dev)

    out = Path(out_dir)
    session, frames_dir, windowed = demo_session("gpt", out, width, height, every, window)
    # what the renderer reads in place: attention per layer (heads, query, key) and the lens values
    attn = [empty((cfg.n_head, cfg.context, cfg.context), device=dev) for _ in range(cfg.n_layer)]
    attn_panels = [session.attach(a, "images", normalize="tile", colormap="magma",
                                  name=f"attn L{i + 1} · {cfg.n_head} heads · query × key")
                   for i, a in enumerate(attn)]
    lens = empty((cfg.n_layer + 1, n_lens), device=dev)
    lens_panel = session.attach(
        lens, "textgrid", name="logit lens: top next char, colour = its probability",
        ids=np.zeros((cfg.n_layer + 1, n_lens), np.int64), vocab=data.vocab,
        row_labels=[f"L{i}" for i in range(cfg.n_layer + 1)], col_labels=probe[:n_lens])
    samples = Text("", max_entries=8)
    session.add(samples, name=f"samples (every {sample_every} steps)")
    loss_view = Curve(smoothing=0.95)
    session.add(loss_view, name="loss (raw + EMA)")
    st = session.status()
    log(f"caliper: training on {dev}; drawing on {st.device_line}; training text: {origin} "
        f"({len(text):,} characters, {len(data.vocab)} distinct)")
    log(f"caliper: model {cfg.n_layer} layers x {cfg.n_head} heads, d_model {cfg.d_model}, context "
        f"{cfg.context}; {sum(p.numel() for p in net.parameters()):,} parameters; panels "
        + ", ".join(p.status for p in [*attn_panels, lens_panel]))
    log("caliper: " + ("drawing in a window (space pauses, S saves a PNG)" if windowed else
                       f"no display: writing a frame every {every} steps to {frames_dir}/"))

    losses: list[float] = []
    sample_log: list[tuple[int, str]] = []
    bar = progress_bar(progress, steps, "gpt")
    interrupted = False
    t_start = time.perf_counter()
    try:
        for step in range(steps + 1):
            if session.due(step):  # the probe forward is only for drawing: skip it otherwise
                write_probes(net, probe_ids, attn_panels, attn, lens_panel, lens, data.vocab)
            if step % sample_every == 0 or step == steps:
                sample = data.decode(net.generate(prompt, sample_chars,
                                                  torch.Generator(dev).manual_seed(seed + step)))
                sample_log.append((step, sample))
                loss_note = f", loss {losses[-1]:.2f}" if losses else ""
                samples.append(compact(sample), header=f"-- step {step}{loss_note} --")
            if losses and session.due(step):
                loss_view.set_data(np.asarray(losses, np.float32))
            session.step(step)
            if step == steps:
                break
            net.train()
            x, y = (t.to(dev) for t in data.batch(batch, cfg.context, gen))
            loss = net.loss(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.item()))
            if bar is not None:
                bar.update(1)
                if step % 10 == 0:
                    bar.set_postfix(loss=f"{losses[-1]:.3f}", skipped=session.skipped)
    except KeyboardInterrupt:
        interrupted = True
        log("caliper: interrupted; keeping what was drawn so far")
    finally:
        if bar is not None:
            bar.close()
    session.flush()
    elapsed = time.perf_counter() - t_start
    lens_seen = lens.cpu().numpy().copy()  # exactly the memory the renderer read
    lens_tokens = lens_panel.view.tokens
    hold_window(session, windowed, interrupted, steps, log)
    status = session.status()
    final = out / "final.png"
    session.save_png(final)
    session.close()
    (out / "samples.txt").write_text("".join(f"--- step {s} ---\n{t}\n\n" for s, t in sample_log),
                                     encoding="utf-8")
    frames = sorted(frames_dir.glob("frame_*.png"))
    head = float(np.mean(losses[:10])) if losses else float("nan")
    tail = float(np.mean(losses[-10:])) if losses else float("nan")
    summary = {"frames_written": len(frames), "frames_drawn": status.frames, "skipped": status.skipped,
               "frames_dir": str(frames_dir), "final": str(final), "samples_file": str(out / "samples.txt"),
               "losses": losses, "first_loss": head, "last_loss": tail, "samples": sample_log,
               "steps": steps, "seconds": elapsed, "interrupted": interrupted,
               "paths": [p.path for p in [*attn_panels, lens_panel]], "lens_values": lens_seen,
               "lens_tokens": lens_tokens, "probe": probe, "model": net, "data": data,
               "attention": [a.cpu().numpy().copy() for a in attn], "text_origin": origin,
               "device": dev}
    log(f"caliper: {len(losses)} steps in {elapsed:.1f} s; loss {head:.2f} (first 10 steps) -> "
        f"{tail:.2f} (last 10); {status.frames} frames drawn, {status.skipped} skipped")
    if sample_log:
        log(f"caliper: sample at step {sample_log[-1][0]}:\n{sample_log[-1][1].strip()}")
    if frames:
        log(f"caliper: wrote {len(frames)} frames to {frames_dir}/")
    log(f"caliper: final frame {final}; samples {out / 'samples.txt'}")
    return summary
