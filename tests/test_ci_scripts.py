"""The hardware scripts (ci/*): the deadline helper kills a stuck run with its children, every
pytest run in them is under it, skips are counted by their labels, the shell scripts parse (and
pass shellcheck where it is installed), each starts with the smoke test and ends with one summary
line; and ci/linux-cuda/run.sh runs here end to end in its dry run (lavapipe, the CUDA parts
skipped), so a script that cannot reach its tests fails CI."""

import json
import os
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
    line = r'(echo|Write-Output) \(?"\$\{?NAME\}?: \$status \|'
    summary = [ln for ln in text.splitlines() if re.search(line, ln)]
    assert len(summary) == 1, f"{name} must print exactly one summary line"
    assert re.search(rf'NAME ?= ?"{name}"', text), f"{name}: the summary line names the script"
    smoke = [ln for ln in text.splitlines() if "doctor --selftest --quick" in ln]
    assert len(smoke) == 1 and "deadline.py" in smoke[0], "the smoke test runs first, under a deadline"
    assert "-m trimmed" in text and "CALIPER_CI_SUITE" in text, "the trimmed suite is selected by marker"
    assert "summary.py" in text and "skips" in text, "skips are counted by ci/summary.py"


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


def test_skips_are_counted_by_their_labels_and_by_group(tmp_path):
    log = tmp_path / "log"
    log.write_text("SKIPPED [3] tests/hardware/test_gpu_paths.py:80: n/a on mps: VMM is CUDA's allocator\n"
                   "SKIPPED [2] tests/test_distributed.py:118: needs a CUDA GPU\n"
                   "SKIPPED [1] tests/test_distributed.py:118: n/a on this machine: NCCL needs one GPU per "
                   "rank; it has 1\n"
                   "= 4 passed, 6 skipped, 800 deselected in 12.50s =\n")
    run = [sys.executable, str(ROOT / "ci/summary.py")]
    out = subprocess.run([*run, "skips", str(log)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["4", "2"]
    out = subprocess.run([*run, "result", str(log), "0", "420"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "4 passed, 6 skipped, 800 deselected in 12.50s"
    out = subprocess.run([*run, "result", str(log), "124", "420"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("TIMED OUT after 420s (4 passed")
    log.write_text("ImportError while loading conftest\n")
    out = subprocess.run([*run, "result", str(log), "4", "420"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "no result (rc=4)"


def test_the_nccl_test_is_labelled_not_applicable_on_fewer_than_two_gpus():
    text = (ROOT / "tests/hardware/test_nccl_gather.py").read_text()
    assert 'pytest.skip(f"n/a on this machine: NCCL needs one GPU per rank' in text


def test_linux_cuda_dry_run_reaches_its_tests(tmp_path):
    """The script end to end on lavapipe: the package built and imported from its install folder
    (not the checkout), the smoke test, a tiny trimmed selection and the GPU path tests on the
    checked stand-in, one summary line."""
    if shutil.which("ldconfig") is None and not os.path.exists("/sbin/ldconfig"):
        pytest.skip("needs ldconfig (Linux) to find the Vulkan loader")
    env = {**os.environ, "PYTHON": sys.executable, "CALIPER_CI_DRY_RUN": "1", "CALIPER_CI_OUT": str(tmp_path),
           "CALIPER_CI_TESTS": "tests/test_dtype_decode.py", "CALIPER_CI_WHEELS": str(tmp_path / "none"),
           "PATH": f"{os.environ.get('PATH', '')}:/sbin:/usr/sbin"}
    env.pop("CALIPER_VK_DEVICE", None)
    proc = subprocess.run(["bash", str(SCRIPTS["linux-cuda"]), "-k", "storage_offset or float16_positions"],
                          capture_output=True, text=True, env=env, timeout=600)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]
    assert proc.returncode == 0, f"{last}\n{proc.stdout[-3000:]}"
    assert last.startswith("linux-cuda (dry run): PASSED | smoke test: PASSED"), last
    assert re.search(r"byte-exact suite \(trimmed\).*: 1 passed", last), last
    assert re.search(r"GPU paths \(checked-cuda\): 1 passed", last), last
    report = json.loads((tmp_path / "smoke.json").read_text())
    assert report["passed"] and report["kind"] == "smoke test"


def test_the_macos_link_folder_serves_both_loader_names():
    """The `vulkan` package opens libvulkan.dylib and GLFW libvulkan.1.dylib: both link to the one
    loader the script found, so the window and the engine never load two loaders."""
    text = SCRIPTS["macos-metal"].read_text()
    assert 'ln -s "$loader" "$LIBDIR/libvulkan.dylib"' in text
    assert 'ln -s "$loader" "$LIBDIR/libvulkan.1.dylib"' in text
