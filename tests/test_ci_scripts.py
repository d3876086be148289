"""The hardware scripts (ci/*) cannot run here; what can be checked here is: the deadline helper
kills a stuck run with its children, every pytest run in them is under it, the shell scripts parse
(and pass shellcheck where it is installed), and each ends with one summary line."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {"linux-cuda": ROOT / "ci/linux-cuda/run.sh", "macos-metal": ROOT / "ci/macos/run.sh",
           "windows-cuda": ROOT / "ci/windows/run.ps1"}


def test_the_deadline_kills_a_stuck_run_with_its_children_and_says_so(tmp_path):
    marker = tmp_path / "child-survived"
    child = f"sleep 2; touch {marker}"
    proc = subprocess.run([sys.executable, str(ROOT / "ci/deadline.py"), "0.5", "--", "bash", "-c",
                           f"({child}) & sleep 60"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 124 and "ran past 0.5 s" in proc.stderr
    subprocess.run(["sleep", "3"])  # long enough for an orphaned child to have written its marker
    assert not marker.exists(), "the deadline left a child of the stuck run alive"


def test_the_deadline_passes_the_exit_status_through():
    proc = subprocess.run([sys.executable, str(ROOT / "ci/deadline.py"), "60", "--", sys.executable, "-c",
                           "import sys; sys.exit(3)"], timeout=60)
    assert proc.returncode == 3


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_pytest_run_is_under_the_deadline_and_one_summary_line_ends_it(name):
    text = SCRIPTS[name].read_text()
    runs = [ln for ln in text.splitlines() if "-m pytest" in ln]
    assert len(runs) == 2 and all("deadline.py" in ln for ln in runs), runs
    assert "tests/hardware" in text and "CALIPER_HW_BACKENDS=" in text.replace('$env:CALIPER_HW_BACKENDS = "',
                                                                              "CALIPER_HW_BACKENDS=")
    summary = [ln for ln in text.splitlines() if re.search(rf'(echo|Write-Output).*"{name}: \$status \|', ln)
               or re.search(rf'Write-Output \("{name}: \$status', ln)]
    assert len(summary) == 1, f"{name} must print exactly one summary line"


def test_linux_cuda_keeps_lavapipe_visible_for_the_another_device_test():
    text = SCRIPTS["linux-cuda"].read_text()
    assert 'VK_DRIVER_FILES="$nvidia_icd${lvp_icd:+:$lvp_icd}"' in text
    assert 'VK_DRIVER_FILES="$VK_DRIVER_FILES:$lvp_icd"' in text


@pytest.mark.parametrize("name", ["linux-cuda", "macos-metal"])
def test_shell_scripts_parse_and_pass_shellcheck(name):
    path = SCRIPTS[name]
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck); bash -n passed")
    proc = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
