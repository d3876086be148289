"""``caliper demo digits|gpt --device auto|cuda|mps|cpu``: the model and the drawn tensors on the
device asked for (here the CPU; a GPU that is absent refused in one line, before anything is
written)."""

import pytest
import torch

from caliper_vk.cli import main
from caliper_vk.demos import digits, gpt
from caliper_vk.demos._live import train_device
from device_paths import cpu_path

ABSENT = {"cuda": not torch.cuda.is_available(), "mps": not torch.backends.mps.is_available()}


def test_auto_picks_the_gpu_torch_has_else_the_cpu():
    want = "cuda" if not ABSENT["cuda"] else "mps" if not ABSENT["mps"] else "cpu"
    assert train_device("auto") == want
    assert train_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="use one of auto, cuda, mps, cpu"):
        train_device("tpu")


@pytest.mark.parametrize("name", ["digits", "gpt"])
@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_an_absent_gpu_is_refused_in_one_line_before_anything_is_written(name, device, tmp_path, capsys):
    if not ABSENT[device]:
        pytest.skip(f"n/a on this machine: it has {device}")
    out = tmp_path / "out"
    extra = ["--text", __file__] if name == "gpt" else []
    assert main(["demo", name, "--device", device, "--headless", "--steps", "1", "--out", str(out),
                 *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"caliper: error: --device {device}: torch {torch.__version__}")
    assert "sees no" in err[-1] and "--device auto/cpu" in err[-1]
    assert not out.exists()


def test_an_unknown_device_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "digits", "--device", "tpu"])
    assert exc.value.code == 2 and "invalid choice: 'tpu'" in capsys.readouterr().err


def test_digits_on_the_cpu_draws_its_cpu_tensor(tmp_path):
    summary = digits.run(out_dir=tmp_path, steps=2, every=1, width=64, height=48, window=False,
                         progress=False, log=lambda *a: None, device="cpu")
    assert summary["device"] == "cpu" and summary["path"] == cpu_path()
    assert summary["frames_written"] >= 2


def test_gpt_on_the_cpu_draws_its_cpu_tensors(tmp_path):
    text = "To be, or not to be, that is the question.\n\n" * 40
    summary = gpt.run(out_dir=tmp_path, steps=2, every=1, sample_every=1, width=320, height=240,
                      window=False, progress=False, log=lambda *a: None, text=text,
                      model=dict(n_layer=1, n_head=2, d_model=16, context=32), batch=4, sample_chars=8,
                      device="cpu")
    assert summary["device"] == "cpu" and set(summary["paths"]) == {cpu_path()}
    assert summary["frames_written"] >= 2
