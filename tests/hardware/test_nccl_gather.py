"""The NCCL gather on a machine with two or more NVIDIA GPUs: a 2-rank torchrun job whose probes
are CUDA tensors takes the collective path (the draw decision broadcast at every step, the
payloads GPU to GPU in one batch_isend_irecv on each rank's training thread, only for drawn
steps) into the renderer's shared CUDA memory; rank 0's frames are the twins, byte for byte.
tests/test_distributed.py runs the same path with gloo on CPU."""

import json

import pytest
import torch

from test_distributed import check_frames, torchrun_two


def test_nccl_gather_draws_the_twins_and_sends_only_drawn_steps(tmp_path, artifacts):
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip(f"n/a on this machine: NCCL needs one GPU per rank, 2 or more; it has "
                    f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}")
    done = torchrun_two(tmp_path, steps=5, CALIPER_TEST_BACKEND="nccl", CALIPER_TEST_PAUSE="3")
    assert done.returncode == 0, done.stderr[-3000:]
    result = check_frames(tmp_path, 2, [1, 2, 4, 5], artifacts)
    sender = json.loads((tmp_path / "rank1.json").read_text())
    assert result["exchanged"] == sender["exchanged"] == 4
