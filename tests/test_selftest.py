"""``caliper doctor --selftest``: the smoke test and the full self-test on this device (lavapipe
here), the report written without personal paths, a required backend that is absent refused in one
line."""

import json
import socket
from pathlib import Path

import pytest

from caliper_vk import selftest
from caliper_vk.cli import main
from caliper_vk.engine.instance import validation_requested
from device_paths import cpu_path, host_import


def test_the_smoke_test_writes_its_report_and_summary_line(tmp_path, capsys):
    assert main(["doctor", "--selftest", "--quick", "--report", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "Vulkan devices" in out  # the doctor's report comes first
    last = out.strip().splitlines()[-1]
    passed = 8 + validation_requested() - (not host_import())  # the layer's check runs when it is on
    counts = f"{passed} passed, 0 failed, {1 + (not host_import())} skipped"
    assert last.startswith(f"caliper smoke test: PASSED | {counts} | backend cpu"), last
    report = json.loads((tmp_path / "r.json").read_text())
    names = [c["name"] for c in report["checks"]]
    assert names[:2] == ["device found by UUID", "cpu tensor exported and imported"]
    assert {f"{v} float32" for v in selftest.TENSOR_VIEWS} <= set(names) and "a write racing a read" in names
    skipped = [c for c in report["checks"] if c["status"] == "skipped"]
    assert all(c["detail"].startswith("n/a on ") for c in skipped)  # labelled: not applicable here
    assert report["passed"] and report["summary"] == last and "Vulkan devices" in report["doctor"]
    assert (tmp_path / "r.txt").read_text().startswith(last)


def test_the_full_self_test_checks_every_dtype_and_times_each_path(tmp_path):
    result = selftest.run(quick=False, log=None)
    assert result.passed, result.text()
    names = {c.name for c in result.checks}
    assert {f"{v} {d}" for v in selftest.TENSOR_VIEWS for d in selftest.DTYPES} <= names
    assert {"text (host-fed)", "confusion (host-fed)"} <= names
    paths = [t["path"] for t in result.timings]
    assert paths == [f"cpu, caliper_vk.empty ({cpu_path()})", "cpu, ordinary tensor, staged (host staging)"]
    assert all(t["ms_per_frame"] > 0 for t in result.timings)
    json_path, txt_path = result.write(tmp_path / "full")
    assert json_path.suffix == ".json" and json.loads(json_path.read_text())["version"] == 1
    assert "Transfer paths" in txt_path.read_text()


def test_a_failed_view_fails_the_run_and_names_the_first_difference(monkeypatch):
    """A check that fails: the run fails, its summary line names the first failure."""
    monkeypatch.setattr(selftest, "_same", lambda got, want: "3 of 9 pixels differ from the numpy twin")
    result = selftest.run(quick=True, log=None)
    assert not result.passed
    assert "first failure: cpu tensor exported and imported: 3 of 9 pixels differ" in result.summary_line()


def test_the_report_has_no_home_folder_user_or_host_name(tmp_path, monkeypatch):
    home = tmp_path / "home" / "someone"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(selftest, "_user", lambda: "someone")
    result = selftest.SelfTest(kind="self-test", backend="cpu", device="llvmpipe (cpu)")
    result.checks.append(selftest.Check("x", selftest.PASSED, f"compiler {home}/.venv/bin/glslc, user someone "
                                        f"on {socket.gethostname()}"))
    json_path, txt_path = result.write(tmp_path / "r.json")
    for text in (json_path.read_text(), txt_path.read_text()):
        assert str(home) not in text and "someone" not in text
        assert "compiler ~/.venv/bin/glslc" in text and "user <user>" in text
        if len(socket.gethostname()) > 2:
            assert socket.gethostname() not in text and "on <host>" in text


@pytest.mark.parametrize("backend", ["cuda", "mps"])
def test_a_required_backend_that_is_absent_fails_in_one_line(backend, tmp_path, capsys):
    import torch

    present = torch.cuda.is_available() if backend == "cuda" else torch.backends.mps.is_available()
    if present:
        pytest.skip(f"n/a on this machine: it has {backend}")
    assert main(["doctor", "--selftest", "--quick", "--require", backend,
                 "--report", str(tmp_path / "r.json")]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"caliper smoke test: FAILED | the {backend} backend was required but torch")
    assert not Path(tmp_path / "r.json").exists()


def test_selftest_options_need_selftest(capsys):
    assert main(["doctor", "--quick"]) == 2
    assert "--quick, --require and --report are options of --selftest" in capsys.readouterr().err
