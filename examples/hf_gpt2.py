"""Caliper in a Hugging Face Trainer: attention maps of a GPT-2 as it learns, in one callback.

Builds a small GPT-2 from a config (no download: 2 layers, 64-dim, a byte-level
vocabulary of 256) and trains it with ``transformers.Trainer`` on a text file
(by default the sonnets bundled with Caliper's tests). ``CaliperCallback``
draws the attention of every layer from the model's own outputs
(``output_attentions=True``, one tile per head), the first block's MLP output
and the token embedding along fixed principal axes, after every optimizer step
within the session's overhead budget, and records the run with the Trainer's
logged loss and the probes:

    .venv/bin/python examples/hf_gpt2.py --out out/hf_gpt2
    caliper view out/hf_gpt2/run

Needs ``pip install 'caliper-vk[hf]'``. With a display it opens a window;
without one it writes the last frame to ``--out``/final.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import transformers

import caliper_vk as cv
from caliper_vk.integrations.hf import CaliperCallback

SONNETS = Path(__file__).resolve().parents[1] / "tests" / "data" / "sonnets.txt"


class Bytes(torch.utils.data.Dataset):
    """Windows of ``length`` bytes of a text: each is its own label (the model shifts)."""

    def __init__(self, text: str, length: int = 64):
        self.data = torch.tensor(list(text.encode("utf-8", "replace")), dtype=torch.long)
        self.length = length

    def __len__(self):
        return max(1, (len(self.data) - 1) // self.length)

    def __getitem__(self, i):
        x = self.data[i * self.length:(i + 1) * self.length]
        return {"input_ids": x, "labels": x}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--text", default=str(SONNETS), help="a plain text file to train on")
    ap.add_argument("--out", default="out/hf_gpt2")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--budget", type=float, default=0.05)
    a = ap.parse_args()
    out = Path(a.out)
    transformers.logging.set_verbosity_error()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    session = cv.Session(size=(1200, 800), budget=a.budget, title="Caliper · Hugging Face")
    cb = CaliperCallback(outputs=["transformer.h.0.mlp"], embeddings="transformer.wte", run_dir=out / "run",
                         session=session, overwrite=True, record_every=25)
    args = transformers.TrainingArguments(
        output_dir=str(out / "trainer"), max_steps=a.steps, per_device_train_batch_size=8, learning_rate=1e-3,
        logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
    text = Path(a.text).read_text(encoding="utf-8")
    transformers.Trainer(model=model, args=args, train_dataset=Bytes(text), callbacks=[cb]).train()
    print(f"caliper: {session.status().line()}")
    if session.window is None:
        print(f"caliper: final frame {session.save_png(out / 'final.png')}")
    session.close()
    print(f"caliper: run recorded in {out / 'run'} (caliper view {out / 'run'})")


if __name__ == "__main__":
    main()
