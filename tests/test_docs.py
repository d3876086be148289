"""Docs that run: every code block in README.md and docs/*.md is executed here, as a user would
paste it, and what it draws or records is checked; a snippet that drifts from the code fails CI.

How a block runs:

- ``python`` blocks run in a fresh process, in a folder of their document's own (blocks of one
  document share it, in order: a later block may read a run an earlier one recorded), with no
  display (a session writes PNG frames). Many snippets use names a real script defines before
  them (``model``, ``loader``, ``x``): :data:`SETUP` gives each such block a small prelude that
  makes them (a few steps of data, a tiny model) and a postlude that checks the outcome (frames
  drawn and not blank, a run that loads, byte-exact twins). The block itself is run as written.
- ``bash``/``sh`` blocks run line by line with the venv's ``caliper`` on PATH.
- ``text`` blocks are output shown to the reader, not code; ``json`` blocks are schema sketches
  whose top-level keys are compared with a file Caliper writes.
- Blocks that cannot run here are in :data:`SKIP`, each with its reason; an entry naming no
  block fails, so the table stays true.

A block's id is ``FILE::heading`` (``#2`` for a second block under one heading).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGS = {"python", "bash", "sh", "text", "json"}
TIMEOUT_S = 300


@dataclass
class Block:
    id: str
    path: Path
    line: int
    lang: str
    body: str


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def collect() -> list[Block]:
    blocks = []
    for path in DOCS:
        heading, seen, lines = "top", {}, path.read_text().splitlines()
        k = 0
        while k < len(lines):
            line = lines[k]
            if line.startswith("```"):
                end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith("```"))
                key = f"{path.relative_to(ROOT)}::{heading}"
                seen[key] = seen.get(key, 0) + 1
                ident = key if seen[key] == 1 else f"{key}#{seen[key]}"
                body = "\n".join(lines[k + 1:end]) + "\n"
                blocks.append(Block(ident, path, k + 1, line[3:].strip(), body))
                k = end + 1
                continue
            m = re.match(r"#{1,6} (.+)$", line)
            if m:
                heading = _slug(m.group(1))
            k += 1
    return blocks


BLOCKS = collect()

# Blocks that cannot run here, and why. Each is covered elsewhere where it can be.
SKIP = {
    "README.md::quick-start": "the suite itself (./tools/test) and the digits demo, which tests/test_demo.py "
                              "runs (./tools/demo installs system packages first)",
    "README.md::watching-a-remote-run#2": "ssh -L to a remote machine: no second machine here",
    "docs/profiles.md::device-profiles": "runs the test suite under a profile: ./tools/test does that itself "
                                         "for every profile",
}

_FRAMES_OK = """
def _frames_ok(pattern):
    import glob
    from PIL import Image
    frames = sorted(glob.glob(pattern, recursive=True))
    assert frames, f"no frames match {pattern}"
    with Image.open(frames[-1]) as im:
        colours = len(set(im.convert("RGB").getdata()))
    assert colours > 8, f"{frames[-1]} is nearly blank ({colours} colours)"
    return frames
"""

_MLP = """
import collections
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(collections.OrderedDict(
    fc1=torch.nn.Linear(8, 16), relu1=torch.nn.ReLU(), fc2=torch.nn.Linear(16, 16), relu2=torch.nn.ReLU(),
    out=torch.nn.Linear(16, 3)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = torch.nn.CrossEntropyLoss()
loader = [(torch.randn(32, 8), torch.randint(0, 3, (32,))) for _ in range(4)]
epochs = 2
x_val, y_val = torch.randn(64, 8), torch.randint(0, 3, (64,))
"""

_EMBED = """
import torch
torch.manual_seed(0)
x = torch.randn(300, 64)
y = torch.randint(0, 10, (300,))
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(64, 3)
        self.attn_weights = torch.softmax(torch.randn(16, 16), dim=-1)
model = Model()
emb = torch.zeros(300, 3)
loader = range(12)
"""

_WEB_DONE = """
assert session.url.startswith("http://127.0.0.1:") and "token=" in session.url, session.url
session.close()
"""

# name -> (prelude, postlude): Python run before and after the block, in the same process.
SETUP = {
    "README.md::watching-a-training-loop": (_EMBED, _FRAMES_OK + """
s = caliper_vk.session()
s.flush()
assert s.frames >= 1 and "zero-copy" in str(caliper_vk.status()), caliper_vk.status()
_frames_ok("caliper-frames/*/frame_*.png")
"""),
    "README.md::with-pytorch-lightning-or-the-hugging-face-trainer": ("""
import pytorch_lightning as L
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32))
args = TrainingArguments(output_dir="hf-out", report_to=[], max_steps=3, per_device_train_batch_size=2,
                         use_cpu=True, logging_steps=1, save_strategy="no", disable_tqdm=True)
ds = [{"input_ids": t, "labels": t} for t in torch.randint(0, 64, (8, 16))]
""", """
trainer.train()
import caliper_vk
run = caliper_vk.load_run("runs/gpt2")
assert run.status == "complete", run.status
"""),
    "README.md::watching-a-remote-run": ("import caliper_vk\n", _WEB_DONE),
    "README.md::recording-a-run-and-the-dashboard": ("import caliper_vk\n" + _MLP, """
run = caliper_vk.load_run("runs/mlp")
assert run.status == "complete" and len(run.epochs) == epochs, (run.status, run.epochs)
"""),
    "README.md::custom-panels": ("""
import shutil, torch, caliper_vk
shutil.copy(EXAMPLES / "my_colour.glsl", "my_colour.glsl")
weights = torch.randn(32, 32)
""", _FRAMES_OK + """
assert caliper_vk.step() is True
s = caliper_vk.session()
s.flush()
assert s.frames == 1 and s.panels[0].error is None
"""),
    "docs/custom-panels.md::custom-panels-your-own-glsl-drawn-like-a-built-in-view": ("""
import shutil
import numpy as np
import torch
shutil.copy(EXAMPLES / "my_colour.glsl", "my_colour.glsl")
weights = torch.randn(32, 32)
t1, t2 = torch.rand(40), torch.rand(50)

def numpy_twin(inputs, params, width, height):
    a, b = inputs["a"].reshape(-1), inputs["b"].reshape(-1)
    rows = (np.arange(height, dtype=np.int64) * a.size) // height
    cols = (np.arange(width, dtype=np.int64) * b.size) // width
    hit = a[rows][:, None] * np.float32(params["gain"]) > b[cols][None, :]
    return np.where(hit[..., None], np.array([255, 200, 0, 255]), np.array([20, 20, 40, 255]))
""", """
assert caliper_vk.step() is True
s = caliper_vk.session()
s.flush()
assert s.frames == 1 and all(p.error is None for p in s.panels), [p.error for p in s.panels]
"""),
    "docs/dashboard.md::recording-runs-and-the-dashboard": ("""
import collections
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(collections.OrderedDict(
    conv1=torch.nn.Conv2d(1, 4, 3, padding=1), relu1=torch.nn.ReLU(), flat=torch.nn.Flatten(),
    fc=torch.nn.Linear(4 * 8 * 8, 16), relu2=torch.nn.ReLU(), out=torch.nn.Linear(16, 3)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
loader = [(torch.randn(16, 1, 8, 8), torch.randint(0, 3, (16,))) for _ in range(3)]
epochs = 2
x_val, y_val = torch.randn(24, 1, 8, 8), torch.randint(0, 3, (24,))
names = ["a", "b", "c"]
""", """
run = caliper_vk.load_run("runs/mlp")
assert run.status == "complete" and len(run.epochs) == epochs and run.snapshots, (run.status, run.snapshots)
assert "features/conv1" in run.arrays, sorted(run.arrays)
"""),
    "docs/remote.md::a-browser": ("import caliper_vk\n" + _EMBED + "loader = [None] * 3\n", _WEB_DONE),
    "docs/views.md::drawing-arrays-directly": ("""
import numpy as np
rng = np.random.default_rng(0)
embeddings = rng.standard_normal((500, 3)).astype(np.float32)
new_embeddings = embeddings * 2
targets = rng.integers(0, 10, 500)
attention = rng.random((4, 16, 16)).astype(np.float32)
""", """
assert np.array_equal(canvas.render(), canvas.reference())   # after set_data too
canvas.close()
"""),
}

# Blocks run as a torch.distributed job of two processes (gloo); prelude, postlude as in SETUP.
DISTRIBUTED = {
    "docs/dashboard.md::sharded-models-fsdp": ("", """
import os
if os.environ["RANK"] == "0":
    from caliper_vk.record import load_run
    run = load_run("runs/sharded")
    assert list(run.metrics["weight_norm/0.weight"].step) == [1, 2, 3, 4, 5]
    assert len(run.metrics["update_ratio/global"]) == 5 and "weights/2.bias" in run.histograms
"""),
    "docs/live.md::distributed-jobs-every-rank-in-one-window": ("""
import torch
import torch.distributed as dist
import caliper_vk
dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
batch, steps = 32, 6
attn = torch.rand(8, 8)
h = torch.randn(batch, 3)
project = lambda h: h * 2
""", """
dist.barrier()
if dist.get_rank() == 0:
    s = caliper_vk.session()
    s.flush()
    assert s.frames >= 1 and len(s.panels) == 2, (s.frames, s.panels)
    rec.close()
dist.destroy_process_group()
"""),
}


def _env(cwd: Path) -> dict:
    env = dict(os.environ)
    for var in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(var, None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("CALIPER_VK_BUDGET", "off")
    env["HF_HUB_OFFLINE"] = "1"
    return env


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {}

    def folder(block: Block) -> Path:
        key = block.path.name
        if key not in made:
            made[key] = tmp_path_factory.mktemp(key.replace(".", "_"))
        return made[key]

    return folder


def _script(block: Block, prelude: str, postlude: str) -> str:
    head = f"from pathlib import Path\nEXAMPLES = Path({str(ROOT / 'examples')!r})\n"
    return head + textwrap.dedent(prelude) + "\n" + block.body + "\n" + textwrap.dedent(postlude)


def _run(cmd, cwd: Path, what: str):
    proc = subprocess.run(cmd, cwd=cwd, env=_env(cwd), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-6000:]}"
    return proc


def test_every_block_is_tagged_and_every_table_entry_names_a_block():
    ids = {b.id for b in BLOCKS}
    untagged = [f"{b.path.name}:{b.line}" for b in BLOCKS if b.lang not in LANGS]
    assert not untagged, f"code blocks need a language ({', '.join(sorted(LANGS))}): {untagged}"
    stale = sorted((set(SKIP) | set(SETUP) | set(DISTRIBUTED)) - ids)
    assert not stale, f"tables name blocks that no longer exist: {stale}; blocks: {sorted(ids)}"


RUNNABLE = [b for b in BLOCKS if b.lang in ("python", "bash", "sh")]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_a_doc_block_runs(block, folders):
    if block.id in SKIP:
        pytest.skip(SKIP[block.id])
    cwd = folders(block)
    if block.lang in ("bash", "sh"):
        if block.id == "README.md::recording-a-run-and-the-dashboard#2":
            shutil.copytree(cwd / "runs/mlp", cwd / "runs/other", dirs_exist_ok=True)
        for line in block.body.splitlines():
            command = line.split("#")[0].strip()
            if command:
                _run(["bash", "-c", command], cwd, f"{block.id}: {command}")
        if "--png out.png" in block.body:
            assert (cwd / "out.png").stat().st_size > 0
        return
    if block.id in DISTRIBUTED:
        prelude, postlude = DISTRIBUTED[block.id]
        script = cwd / "distributed_block.py"
        script.write_text(_script(block, prelude, postlude))
        _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              str(script)], cwd, block.id)
        return
    prelude, postlude = SETUP.get(block.id, ("", ""))
    _run([sys.executable, "-c", _script(block, prelude, postlude)], cwd, block.id)


JSON = [b for b in BLOCKS if b.lang == "json"]


@pytest.mark.parametrize("block", JSON, ids=[b.id for b in JSON])
def test_a_json_sketch_has_the_keys_caliper_writes(block, tmp_path):
    import caliper_vk

    rec = caliper_vk.Recorder(tmp_path / "run", config={})
    rec.log({"loss": 1.0}, step=0)
    rec.close()
    written = json.loads((tmp_path / "run" / "run.json").read_text())
    mentioned = set(re.findall(r'"(\w+)":', block.body))
    leading = set(re.findall(r'^  "(\w+)":', block.body, re.M))
    missing, extra = sorted(set(written) - mentioned), sorted(leading - set(written))
    assert not missing and not extra, (f"{block.id}: run.json's keys {missing} are not in the sketch; "
                                       f"the sketch's {extra} are not in run.json")
