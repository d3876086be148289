"""Ctrl-C in the digits demo: a clean exit that keeps the frames written so far."""

import signal
import subprocess
import sys
import time


def test_ctrl_c_keeps_frames_and_exits_cleanly(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "caliper_vk.cli", "demo", "digits", "--headless", "--steps", "100000",
         "--every", "5", "--size", "160x120", "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    frames = tmp_path / "frames"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(frames.glob("frame_*.png"))) < 3:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert "interrupted; keeping what was drawn so far" in out
    assert len(list(frames.glob("frame_*.png"))) >= 3
    assert (tmp_path / "contact_sheet.png").exists() and (tmp_path / "final.png").exists()
