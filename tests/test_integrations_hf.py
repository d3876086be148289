"""CaliperCallback for transformers.Trainer: a GPT-2 built from a tiny config (no download)
trained a few steps on CPU; attention from the model's own outputs; the run directory opens
with caliper's loader with the Trainer's loss and the probes."""

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is in requirements-dev.txt")

import caliper_vk as cv  # noqa: E402
from caliper_vk.integrations.hf import CaliperCallback  # noqa: E402
from caliper_vk.record import load_run  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=48, length=16):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 64, (n, length), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def tiny_gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=16,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg)


def args(tmp_path, **extra):
    return transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=8, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
        learning_rate=1e-3, **extra)


def test_hf_callback_draws_attention_and_records_a_run(tmp_path):
    model = tiny_gpt2()
    assert model.config._attn_implementation != "eager"  # SDPA returns no weights: the probe switches
    with cv.Session(window=False, size=(480, 320), budget=None) as session:
        cb = CaliperCallback(outputs=["transformer.h.1.mlp"], embeddings="transformer.wte",
                             run_dir=tmp_path / "run", session=session, record_every=3)
        trainer = transformers.Trainer(model=model, args=args(tmp_path), train_dataset=Tokens(),
                                       callbacks=[cb])
        trainer.train()
        names = {p.name for p in session.panels}
        assert {"attention/layer0", "attention/layer1", "transformer.h.1.mlp",
                "transformer.wte (principal axes)"} <= names
        assert session.frames >= 1  # steps while a frame is still in flight skip drawing
        assert session.render()[..., :3].std() > 0
    assert model.config._attn_implementation != "eager"  # switched back after each probe
    run = load_run(tmp_path / "run")
    assert list(run.metrics["train/loss"].step) == [1, 2, 3, 4, 5, 6]
    assert "grad_norm/global" in run.metrics and "lr/group0" in run.metrics
    attn = run.arrays["attention/attention/layer1"]
    assert [f.step for f in attn] == [3, 6] and attn[0].array.shape == (4, 16, 16)
    rows = attn[0].array.sum(-1)
    assert abs(rows - 1).max() < 1e-4  # softmax rows: real attention weights
    assert run.arrays["outputs/transformer.h.1.mlp"][0].array.shape == (16, 32)
    assert run.arrays["embedding/transformer.wte"][0].array.shape == (64, 3)


def test_hf_callback_without_a_run_dir_only_draws(tmp_path):
    with cv.Session(window=False, size=(320, 240), budget=0.05) as session:  # the default share
        cb = CaliperCallback(session=session)
        transformers.Trainer(model=tiny_gpt2(), args=args(tmp_path), train_dataset=Tokens(),
                             callbacks=[cb]).train()
        assert cb.recorder is None and session.frames >= 1
        assert "of training" in session.status().line()


def test_hf_probes_are_bounded_and_the_panels_name_the_cut(tmp_path):
    with cv.Session(window=False, size=(480, 320), budget=None) as session:
        cb = CaliperCallback(outputs=["transformer.h.0.mlp"], embeddings="transformer.wte", session=session,
                             limits=dict(layers=1, heads=2, tokens=8, rows=16, features=24))
        transformers.Trainer(model=tiny_gpt2(), args=args(tmp_path), train_dataset=Tokens(),
                             callbacks=[cb]).train()
        panels = {p.name: p for p in session.panels}
        buffers = cb.probes.buffers
        assert "attention/layer0" not in panels  # one layer of two: the last
        assert buffers["attention/layer1"].shape == (2, 8, 8)  # 2 heads of 4, 8 tokens of 16
        assert panels["attention/layer1"].note == "example tokens 0–7 of 16, layer 1 of 2, heads 0–1 of 4"
        assert buffers["transformer.h.0.mlp"].shape == (8, 24)
        assert panels["transformer.h.0.mlp"].note == "example tokens 0–7 of 16, columns 0–23 of 32"
        assert buffers["transformer.wte"].shape == (16, 3)
        assert panels["transformer.wte (principal axes)"].note == "16 of 64 rows"
