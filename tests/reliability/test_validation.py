"""The validation layer is on for the whole suite, in the processes tests start too: a child's
validation error reaches the parent's count (tests/conftest.py) and fails the test that started it."""

import os
import subprocess
import sys
import textwrap

from caliper_vk.engine.instance import VALIDATION_LOG_ENV, validation_layer_available, validation_requested

MISUSE = textwrap.dedent("""
    import os
    from caliper_vk.engine import Buffer, Device, Recorder
    with Device() as dev, Buffer(dev, 64) as buf:
        rec = Recorder(dev).begin()
        rec.fill(buf, 0, offset=2, size=8)  # offset must be a multiple of 4; never submitted
        rec.end()
        rec.close()
        print(os.getpid(), len(dev.instance.validation_errors))
""")


def test_validation_is_on_here_and_in_child_processes():
    assert validation_requested() and validation_layer_available()
    assert os.environ.get(VALIDATION_LOG_ENV)


def test_a_child_process_validation_error_is_counted():
    """A negative control: a deliberate misuse in a child is written where conftest reads it."""
    log = os.environ[VALIDATION_LOG_ENV]
    start = os.path.getsize(log)
    proc = subprocess.run([sys.executable, "-c", MISUSE], capture_output=True, text=True, timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr[-2000:]
        pid, count = proc.stdout.split()[-2:]
        assert int(count) >= 1
        with open(log, "rb") as f:
            f.seek(start)
            lines = f.read().decode(errors="replace").splitlines()
        assert any(ln.split("\t")[0] == pid and "vkCmdFillBuffer" in ln for ln in lines), lines
    finally:
        os.truncate(log, start)  # the control's deliberate errors are not the suite's
