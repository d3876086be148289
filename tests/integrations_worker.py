"""One rank of tests/test_integrations_ranks.py: the Hugging Face or the Lightning ``Trainer``
with ``CaliperCallback(run_dir=...)`` under ``torchrun --nproc_per_node 2`` (gloo, CPU).

``python integrations_worker.py {hf|lightning} OUT``. Each rank writes ``OUT/rank{r}.json``
with what its callback had at the end of training (read by a callback placed before
Caliper's, so before the session closes): the session's panels, titles, frames and
status line on the rendering rank; that there is none on the other rank.
"""

import json
import os
import sys
from pathlib import Path

import torch

STEPS = 6


def report(out: Path, cb, **extra) -> None:
    rank = int(os.environ["RANK"])
    s = cb.session
    result = {"rank": rank, "session": s is not None, "recorder": cb.recorder is not None, **extra}
    if s is not None:
        result.update(panels={p.name: p.path for p in s.panels}, frames=s.frames,
                      notes={p.name: getattr(p, "note", "") for p in s.panels}, status=s.status().line())
    model = cb.probes.model
    if any(hasattr(p, "full_tensor") for p in model.parameters()):  # sharded: the whole parameters' norms
        result["full_norms"] = {n: float(torch.linalg.vector_norm(p.full_tensor().float()))
                                for n, p in model.named_parameters()}  # (every rank: a collective)
    job = cb.probes.job
    result["job"] = None if job is None else {"world": job.world, "gathering": job.gathering,
                                              "probes": sorted(job.probes)}
    (out / f"rank{rank}.json").write_text(json.dumps(result))


def hf(out: Path, strategy: str = "ddp") -> None:
    import transformers

    from caliper_vk.integrations.hf import CaliperCallback

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, n=64, length=16):
            g = torch.Generator().manual_seed(0)
            self.x = torch.randint(0, 64, (n, length), generator=g)

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"input_ids": self.x[i], "labels": self.x[i]}

    class Report(transformers.TrainerCallback):
        def on_train_end(self, args, state, control, **kwargs):
            report(out, cb)

    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=16,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)
    cb = CaliperCallback(outputs=["transformer.h.1.mlp"], embeddings="transformer.wte", run_dir=out / "run",
                         window=False, budget=None, frames_every=2, record_every=3)
    args = transformers.TrainingArguments(
        output_dir=str(out / "hf"), max_steps=STEPS, per_device_train_batch_size=4, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
        learning_rate=1e-3, ddp_backend="gloo",
        **({"fsdp": "full_shard", "fsdp_config": {"use_orig_params": True}} if strategy == "fsdp" else {}))
    transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[Report(), cb]).train()


def lightning(out: Path, strategy: str = "ddp") -> None:
    import pytorch_lightning as pl

    from caliper_vk.integrations.lightning import CaliperCallback

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(20, 16)
            self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 20))

        def forward(self, x):
            h = self.embed(x)
            a, _ = self.attn(h, h, h, need_weights=False)  # the fast path: the probe asks for weights
            return self.mlp(h + a)

        def training_step(self, batch, idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self(x).flatten(0, 1), y.flatten())

        def configure_model(self):  # ModelParallelStrategy: FSDP2 over the data-parallel ranks
            if strategy != "modelparallel":
                return
            from torch.distributed.fsdp import fully_shard

            mesh = self.device_mesh["data_parallel"]
            for m in (self.embed, self.attn, self.mlp):
                fully_shard(m, mesh=mesh)
            fully_shard(self, mesh=mesh)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.01)

    used = []  # per optimizer step: the global norm of the whole gradients the step uses

    class Report(pl.Callback):
        def on_before_optimizer_step(self, trainer, pl_module, optimizer):  # inside the step's closure
            grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
            grads = [g.full_tensor() if hasattr(g, "full_tensor") else g for g in grads]  # (every rank)
            used.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float())
                                                                    for g in grads]))))

        def on_train_end(self, trainer, pl_module):
            report(out, cb, used_grad_norms=used)

    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 20, (64, 12), generator=g)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x + 1) % 20), batch_size=8)
    torch.manual_seed(0)
    cb = CaliperCallback(outputs=["mlp.1"], attention=["attn"], embeddings="embed", run_dir=out / "run",
                         window=False, budget=None, frames_every=2, record_every=3)
    if strategy == "modelparallel":  # FSDP2 (fully_shard in configure_model), on a CPU too
        from pytorch_lightning.strategies import ModelParallelStrategy

        chosen = ModelParallelStrategy(data_parallel_size=2, tensor_parallel_size=1)
    else:
        chosen = strategy
    trainer = pl.Trainer(callbacks=[Report(), cb], max_steps=STEPS, accelerator="cpu", devices=2,
                         strategy=chosen, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Tiny(), data)


if __name__ == "__main__":
    framework, _, strategy = sys.argv[1].partition(":")  # "lightning:fsdp", "hf:fsdp": a sharded model
    run = {"hf": hf, "lightning": lightning}[framework]
    run(Path(sys.argv[2]), *([strategy] if strategy else []))
