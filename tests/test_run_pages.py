"""A run file's memory-mapped columns: pages a scan touched are handed back (record/mapped.py) and
read again, unchanged, on the next use; the dashboard's scans keep the resident set small."""

from __future__ import annotations

import mmap
import sys

import numpy as np
import pytest

from caliper_vk.record import load_run
from caliper_vk.record.mapped import release_pages
from caliper_vk.record.run import Run, Series

N = 1_000_000


def _rss_file_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssFile line in /proc/self/status")


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    steps = np.arange(N, dtype=np.int64)
    run = Run(name="big", status="complete", ended=True, progress_step=steps)
    for k in range(3):
        v = np.sin(steps / (1000.0 + k)) + k
        v[12345 + k] = 50.0 + k  # a spike the scans must see
        run.metrics[f"m{k}"] = Series(f"m{k}", steps, v, np.zeros(N, bool))
    path = tmp_path_factory.mktemp("big") / "run.json"
    run.save(path)
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(mmap, "MADV_DONTNEED"),
                    reason="resident pages are read from /proc/self/status (Linux)")
def test_released_pages_leave_the_resident_set_and_read_back_the_same(big_run):
    run = load_run(big_run)
    s = run.metrics["m1"]
    base = _rss_file_mb()
    total = float(s.value.sum())  # every page of the 8 MB column is touched
    assert _rss_file_mb() - base > 6
    assert release_pages(s.value) >= s.value.nbytes
    assert _rss_file_mb() - base < 2
    assert float(s.value.sum()) == total and s.value[12346] == 51.0  # read again from the page cache
    release_pages()  # every mapping: nothing is left resident
    assert _rss_file_mb() - base < 2
    assert release_pages(np.zeros(10)) == 0  # an array in no mapping is left alone


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status (Linux)")
def test_scale_decisions_scan_in_chunks_without_holding_the_file(big_run):
    from caliper_vk.dashboard import model, scales

    run = load_run(big_run)
    release_pages()
    base = _rss_file_mb()
    panel = model.Panel("m", "scalar", ["m0", "m1", "m2"])
    assert scales.measured_extremes(run.metrics["m2"]) == (pytest.approx(1.0, abs=1e-6), 52.0)
    assert not model.spans_decades([run], panel)
    assert _rss_file_mb() - base < 8  # three 8 MB columns scanned: never all resident at once


def test_reads_and_searches_in_a_run_file_equal_numpy_and_map_nothing(big_run):
    from caliper_vk.record import mapped

    run = load_run(big_run)
    s = run.metrics["m2"]
    steps = np.asarray(s.step)
    for key in (-5, 0, 1, 511, 512, 123_456, 999_998, 999_999, 10**7):
        for side in ("left", "right"):
            assert mapped.search(s.step, np.int64(key), side) == np.searchsorted(steps, key, side=side)
    assert mapped.search(s.step[::3], np.int64(3000), "left") == 1000  # a strided view
    assert mapped.item(s.value, 12347) == 52.0 and mapped.item(s.value, -1) == s.value[-1]
    with pytest.raises(IndexError):
        mapped.item(s.value, N)
    assert mapped.item(np.arange(5), 2) == 2 and mapped.search(np.arange(5), 3) == 3  # no run file


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status (Linux)")
def test_a_cursor_readout_maps_no_page_of_the_run_file(big_run):
    from caliper_vk.dashboard import model

    run = load_run(big_run)
    release_pages()
    base = _rss_file_mb()
    readings = [model.read_cursor(run, f"m{k}", "step", 654_321.5) for k in range(3)]
    assert _rss_file_mb() - base < 0.5  # a folio per value and per search probe when read through the mapping
    assert [r.step for r in readings] == [654_321] * 3 and readings[1].value == run.metrics["m1"].value[654_321]
    assert not run.metrics["m0"].placeholder.any() and run.metrics["m0"].placeholder.strides == (0,)
