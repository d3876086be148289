"""The probes' bounds (caliper_vk.integrations._bounds): what is cut, what the panel says was cut,
and the embedding's principal axes from a row sample, on the tensor's device, without touching
the training's random state."""

import numpy as np
import pytest
import torch

from caliper_vk.integrations import _bounds as bounds
from caliper_vk.integrations._bounds import Limits


def test_a_module_output_is_cut_to_tokens_and_features_and_says_so():
    a, note = bounds.image(torch.randn(1, 300, 2000, dtype=torch.bfloat16), Limits(tokens=128, features=1024))
    assert a.shape == (128, 1024) and a.dtype == torch.float32 and a.is_contiguous()
    assert note == "rows 0–127 of 300, columns 0–1023 of 2000"
    a, note = bounds.image(torch.randn(1, 16, 32), Limits())
    assert a.shape == (16, 32) and note == ""


def test_an_attention_map_is_cut_to_heads_and_tokens():
    a, note = bounds.attention(torch.rand(1, 32, 512, 512), Limits(heads=8, tokens=128), "layer 5 of 32")
    assert a.shape == (8, 128, 128)
    assert note == "layer 5 of 32, heads 0–7 of 32, tokens 0–127 of 512"
    a, note = bounds.attention(torch.rand(1, 12, 12), Limits())
    assert a.shape == (12, 12) and note == ""


def test_layers_are_evenly_spaced_first_to_last():
    assert bounds.layers(3, Limits(layers=4)) == [0, 1, 2]
    assert bounds.layers(32, Limits(layers=4)) == [0, 10, 21, 31]
    assert bounds.layers(32, Limits(layers=1)) == [31]


def test_the_example_token_sequence_is_cut_and_other_inputs_are_not():
    ex = {"input_ids": torch.zeros(1, 4096, dtype=torch.long), "attention_mask": torch.ones(1, 4096,
                                                                                         dtype=torch.long),
          "pixel_values": torch.zeros(1, 3, 8, 8)}
    cut = bounds.cut_tokens(ex, 128)
    assert cut["input_ids"].shape == (1, 128) and cut["attention_mask"].shape == (1, 128)
    assert cut["pixel_values"].shape == (1, 3, 8, 8)
    assert bounds.sequence_length(ex) == 4096 and bounds.sequence_length(torch.zeros(1, 3, 8, 8)) == 0
    assert bounds.cut_tokens(torch.zeros(1, 7, dtype=torch.long), 128).shape == (1, 7)


def test_rows_are_sampled_evenly_and_fixed():
    rows = bounds.sample_rows(128_000, 4096)
    assert len(rows) == 4096 and rows[0] == 0 and rows[-1] == 127_999
    assert torch.equal(rows, bounds.sample_rows(128_000, 4096, torch.zeros(1)))
    assert torch.equal(bounds.sample_rows(10, 4096), torch.arange(10))


def test_principal_axes_span_the_top_subspace_and_leave_the_random_state_alone():
    g = np.random.default_rng(0)
    scales = np.array([20.0, 10.0, 5.0] + [0.1] * 61)
    x = torch.from_numpy((g.normal(size=(2000, 64)) * scales) @ np.linalg.qr(g.normal(size=(64, 64)))[0])
    x = (x - x.mean(0)).float()
    state = torch.get_rng_state()
    basis = bounds.principal_axes(x)
    assert torch.equal(state, torch.get_rng_state())  # its own generator: training's randomness untouched
    assert basis.shape == (64, 3) and basis.device == x.device
    _, _, vt = np.linalg.svd(x.double().numpy(), full_matrices=False)
    overlap = np.abs(vt[:3] @ basis.double().numpy())  # |cos| between the true and the found axes
    assert np.allclose(np.diag(overlap), 1.0, atol=1e-3)
    assert bounds.principal_axes(torch.randn(50, 2)).shape == (2, 3)  # fewer columns: zero axes


def test_limits_are_checked():
    assert bounds.as_limits({"tokens": 64}).tokens == 64 and bounds.as_limits(None) == Limits()
    with pytest.raises(ValueError, match="at least 1"):
        Limits(heads=0)
    with pytest.raises(TypeError, match="Limits or a dict"):
        bounds.as_limits(5)


def test_out_of_memory_is_recognised():
    assert bounds.out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate"))
    assert bounds.out_of_memory(MemoryError())
    assert not bounds.out_of_memory(ValueError("shape mismatch"))
