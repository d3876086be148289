"""The caliper command: doctor, render, and its user-facing errors."""

import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from caliper_vk.cli import main


def run_cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "caliper_vk.cli", *args], capture_output=True,
                          text=True, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def test_doctor_names_the_device_and_paths():
    rc, out, err = run_cli("doctor")
    assert rc == 0, err
    assert "Caliper uses:" in out
    for path in ("host-pointer import", "opaque-fd import", "timeline semaphores", "CUDA interop",
                 "Metal interop"):
        assert path in out
    # every missing path says why
    for line in out.splitlines():
        if line.strip().startswith("[ no]"):
            assert ": " in line and len(line.split(": ", 1)[1]) > 10, line


def test_doctor_on_lavapipe_reports_host_import():
    _rc, out, _ = run_cli("doctor")
    if "llvmpipe" not in out:
        pytest.skip("not running on lavapipe")
    assert "[yes] host-pointer import" in out
    assert "[yes] timeline semaphores" in out
    assert "[ no] CUDA interop: llvmpipe" in out


def test_render_pointcloud_npy(tmp_path):
    pts = np.random.default_rng(0).normal(size=(500, 3)).astype(np.float32)
    np.save(tmp_path / "p.npy", pts)
    np.save(tmp_path / "l.npy", np.arange(500) % 10)
    out = tmp_path / "out.png"
    assert main(["render", "--view", "pointcloud", "--input", str(tmp_path / "p.npy"),
                 "--labels", str(tmp_path / "l.npy"), "--out", str(out), "--size", "200x100"]) == 0
    img = np.asarray(Image.open(out))
    assert img.shape == (100, 200, 4)
    assert len({tuple(c) for c in img.reshape(-1, 4)}) > 10


def test_render_heatmap_pt(tmp_path):
    import torch

    torch.save(torch.randn(32, 32), tmp_path / "h.pt")
    out = tmp_path / "h.png"
    assert main(["render", "--view", "heatmap", "--input", str(tmp_path / "h.pt"),
                 "--out", str(out), "--colormap", "magma", "--range", "symmetric"]) == 0
    assert Image.open(out).size == (800, 600)


def test_render_histogram(tmp_path):
    np.save(tmp_path / "w.npy", np.random.default_rng(2).normal(size=(64, 64)))
    out = tmp_path / "hist.png"
    assert main(["render", "--view", "histogram", "--input", str(tmp_path / "w.npy"), "--out", str(out),
                 "--bins", "12", "--range=-3,3", "--size", "300x200"]) == 0
    assert Image.open(out).size == (300, 200)


def test_render_curve(tmp_path):
    np.save(tmp_path / "loss.npy", np.exp(-np.arange(500) / 100.0))
    out = tmp_path / "loss.png"
    assert main(["render", "--view", "curve", "--input", str(tmp_path / "loss.npy"), "--out", str(out),
                 "--smoothing", "0.9", "--size", "300x100"]) == 0
    assert Image.open(out).size == (300, 100)
    np.save(tmp_path / "loss.npy", 3.0 * np.exp(-np.arange(500) / 50.0) - 1e-3)  # ends below 0
    assert main(["render", "--view", "curve", "--input", str(tmp_path / "loss.npy"), "--out", str(out),
                 "--log-y", "--size", "300x100"]) == 0


def test_render_npz_with_named_arrays(tmp_path):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "run.npz", positions=rng.normal(size=(50, 2)), values=rng.random(50))
    assert main(["render", "--view", "pointcloud", "--input", str(tmp_path / "run.npz"),
                 "--out", str(tmp_path / "o.png"), "--range", "0,1"]) == 0


@pytest.mark.parametrize("args, message", [
    (["--view", "scatter"],
     "unknown view 'scatter'; available views: confusion, curve, heatmap, histogram, images, pointcloud"),
    (["--view", "heatmap", "--colormap", "rainbowz"], "unknown colormap 'rainbowz'; use"),
    (["--view", "pointcloud", "--input", "missing.npy"], "input file 'missing.npy' does not exist"),
    (["--view", "pointcloud", "--input", "bad.npy"], "cannot read 'bad.npy' as .npy"),
    (["--view", "pointcloud", "--input", "wrong_shape.npy"],
     "positions has shape (10, 4); the pointcloud view takes (N, 3) or (N, 2)"),
    (["--view", "heatmap", "--input", "complex.npy"], "has dtype complex128; accepted:"),
    (["--view", "heatmap", "--input", "cube.npy"], "the heatmap view takes a 2-D array"),
    (["--view", "heatmap", "--range", "1,0"], "must be finite with lo <= hi"),
    (["--view", "heatmap", "--range", "wide"], "--range 'wide': use auto, symmetric or LO,HI"),
    (["--view", "heatmap", "--input", "notes.txt"], "unknown type '.txt'; accepted: .npy"),
    (["--view", "pointcloud", "--point-size", "0"], "point_size_px must be an integer in 1..64"),
])
def test_user_errors_are_one_clear_line(tmp_path, args, message):
    np.save(tmp_path / "ok.npy", np.zeros((10, 3), np.float32))
    np.save(tmp_path / "wrong_shape.npy", np.zeros((10, 4), np.float32))
    np.save(tmp_path / "complex.npy", np.zeros((4, 4), np.complex128))
    np.save(tmp_path / "cube.npy", np.zeros((2, 2, 2), np.float32))
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    (tmp_path / "notes.txt").write_text("hello")
    full = ["render", "--input", "ok.npy", "--out", "o.png", *args]
    rc, _out, err = run_cli(*full, cwd=tmp_path)
    assert rc == 2
    assert "Traceback" not in err
    assert err.startswith("caliper: error: ") and message in err, err
