"""Shared fixtures: the validation layer is on for the whole suite, and any
validation error raised during a test fails that test — in this process, or in a
process the test started (they append theirs to ``CALIPER_VK_VALIDATION_LOG``).
The overhead budget is off unless a test names one (``CALIPER_VK_BUDGET``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("CALIPER_VK_VALIDATION", "1")
# Sessions draw every frame they can unless a test names a budget: whether the default 5% budget
# holds a step back depends on how fast the machine runs the test (tests/test_budget.py tests it)
os.environ.setdefault("CALIPER_VK_BUDGET", "off")
_fd, _CHILD_LOG = tempfile.mkstemp(prefix="caliper-validation-", suffix=".log")
os.close(_fd)
os.environ["CALIPER_VK_VALIDATION_LOG"] = _CHILD_LOG

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
_totals = {"errors": 0, "tests_checked": 0}


@pytest.fixture(scope="session")
def device():
    from caliper_vk.engine import default_device

    return default_device()


@pytest.fixture(autouse=True)
def _no_validation_errors(request):
    from caliper_vk.engine import canvas as canvas_mod
    from caliper_vk.engine.instance import VALIDATION_LOG

    before = len(VALIDATION_LOG)
    child_before = os.path.getsize(_CHILD_LOG)
    yield
    dev = canvas_mod._default_device
    if dev is not None and dev.handle is not None:
        dev.wait()
    new = VALIDATION_LOG[before:]
    with open(_CHILD_LOG, "rb") as f:  # errors of the processes this test started
        f.seek(child_before)
        lines = f.read().decode(errors="replace").splitlines()
    me = str(os.getpid())
    new += [f"(process {pid}) {text}" for pid, _, text in (ln.partition("\t") for ln in lines) if pid != me]
    _totals["tests_checked"] += 1
    _totals["errors"] += len(new)
    if new:
        pytest.fail(f"{len(new)} Vulkan validation error(s):\n" + "\n".join(new[:5]), pytrace=False)


@pytest.fixture
def artifacts(request) -> Path:
    """A folder for this test's failure artifacts (images and diffs)."""
    name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    return ARTIFACTS / name


def pytest_unconfigure(config):
    Path(_CHILD_LOG).unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter):
    from caliper_vk.engine import canvas as canvas_mod

    from caliper_vk.engine.instance import validation_requested

    dev = canvas_mod._default_device
    on = validation_requested()
    terminalreporter.write_line(
        f"Vulkan validation layer: {'on' if on else 'off'}; validation errors: {_totals['errors']} "
        f"(checked after {_totals['tests_checked']} tests)"
        + (f"; device: {dev.info.name}" if dev is not None else ""))
