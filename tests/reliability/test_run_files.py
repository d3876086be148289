"""Run files under stress: the writer killed with SIGKILL at random points, and hostile files fed
to the loader. Every record acknowledged before a kill must be recovered, and a bad file must
give a clear RunFileError (or load what is valid), never a crash, a hang or executed code."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caliper_vk.record import RunFileError, load_run
from caliper_vk.record.log import encode_line
from caliper_vk.record.run import RUN_SCHEMA

WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from caliper_vk.record import Recorder
    rec = Recorder(sys.argv[1])
    out = sys.stdout
    for i in range(1, 100000):
        rec.advance()
        rec.log({"train/loss": float(i), "x/y": 2.0 * i})
        if i % 5 == 0:
            rec.probe("p", np.full((64, 64), i, np.float32), module="m", example="e")
        out.write(f"{i}\\n")
        out.flush()
""")

KILLS = 50


def test_sigkill_at_random_points_loses_at_most_the_record_being_written(tmp_path):
    rng = random.Random(1234)
    summary = []
    for k in range(KILLS):
        run_dir = tmp_path / f"run{k}"
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir)], stdout=subprocess.PIPE, text=True)
        target = rng.randint(0, 400)
        acked = 0
        while acked < target:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for line in proc.stdout:  # acknowledgements already written before the kill
            acked = int(line)
        proc.stdout.close()
        if not (run_dir / "log.jsonl").exists():
            summary.append((acked, 0))
            assert acked == 0
            continue
        run = load_run(run_dir)
        s = run.metrics.get("train/loss")
        got = 0 if s is None else len(s)
        if got:
            np.testing.assert_array_equal(s.value, np.arange(1, got + 1))  # a prefix, no gaps, no damage
            np.testing.assert_array_equal(run.metrics["x/y"].value[:got - 1], 2.0 * np.arange(1, got))
        frames = run.arrays.get("p", [])
        for f in frames:
            assert f.array.shape == (64, 64) and np.all(f.array == f.step)
        assert got >= acked, f"kill {k}: {acked} records acknowledged, {got} recovered"
        assert run.status == "running" and run.ended is False
        summary.append((acked, got))
    assert sum(a for a, _ in summary) > 0
    print(f"\n{KILLS} kills; records acknowledged/recovered: {summary}")


# -- hostile files ---------------------------------------------------------------------------------
def _write(tmp_path: Path, doc, name="run.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def _good() -> dict:
    return {"schema": RUN_SCHEMA, "name": "r", "status": "complete", "finite": True,
            "metrics": {"train/loss": {"step": [1, 2, 3], "value": [3.0, 2.0, 1.0]}},
            "histograms": {"w": [{"step": 1, "lo": -3, "hi": 3, "counts": [1, 2, 3], "below": 0, "above": 1}]},
            "confusions": {"c": [{"step": 1, "matrix": [1, 2, 3, 4]}]}}


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="caliper-run/99"), "schema"),
    (lambda d: d.pop("schema"), "schema"),
    (lambda d: d.update(status="exploded"), "status"),
    (lambda d: d.update(metrics=[1, 2]), "metrics"),
    (lambda d: d.update(histograms="x"), "histograms"),
])
def test_structural_errors_name_the_field(tmp_path, mutate, message):
    doc = _good()
    mutate(doc)
    with pytest.raises(RunFileError, match=message):
        load_run(_write(tmp_path, doc))


@pytest.mark.parametrize("mutate, problem", [
    (lambda d: d["metrics"]["train/loss"].update(step=[1, 2]), "differ in length"),
    (lambda d: d["metrics"]["train/loss"].update(step=[1, -2, 3]), "non-negative"),
    (lambda d: d["metrics"]["train/loss"].update(value=["a", "b", "c"]), "numbers"),
    (lambda d: d["histograms"]["w"][0].update(below="nan"), "below"),
    (lambda d: d["histograms"]["w"][0].update(counts=[1, "nan", 3]), "counts"),
    (lambda d: d["histograms"]["w"][0].update(counts={"dtype": "float64", "shape": [2],
                                                      "b64": "AAAAAAAA+H8AAAAAAADwPw=="}), "NaN"),
    (lambda d: d["histograms"]["w"][0].update(lo=5), "lo < hi"),
    (lambda d: d["confusions"]["c"][0].update(matrix=[1, 2, 3]), "square"),
    (lambda d: d["metrics"]["train/loss"].update(step={"dtype": "object", "shape": [3], "b64": ""}), "dtype"),
    (lambda d: d["metrics"]["train/loss"].update(step={"dtype": "int64", "shape": [3], "b64": "!!"}), "base64"),
])
def test_bad_entries_load_the_rest_and_mark_what_is_missing(tmp_path, mutate, problem):
    doc = _good()
    mutate(doc)
    run = load_run(_write(tmp_path, doc))
    assert any(problem in p for p in run.problems), run.problems


def test_confusion_matrix_given_flat_is_refused_clearly(tmp_path):
    run = load_run(_write(tmp_path, _good()))
    assert "c" not in run.confusions and any("square" in p for p in run.problems)
    assert run.metrics["train/loss"].value.tolist() == [3.0, 2.0, 1.0]


@pytest.mark.parametrize("text, message", [
    ("", "not JSON"), ("{", "not JSON"), ("[" * 100000 + "]" * 100000, "nested too deeply|not JSON"),
    ("[1, 2]", "JSON object"), ('"a"', "JSON object"), ("\xff\xfe", "not JSON"),
    ('["config", {"b64": "QUJD"}]', "JSON object"),
])
def test_garbage_gives_a_clear_error(tmp_path, text, message):
    with pytest.raises(RunFileError, match=message):
        load_run(_write(tmp_path, text))


def test_pickle_is_never_loaded(tmp_path):
    import pickle

    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    p = tmp_path / "run.json"
    p.write_bytes(pickle.dumps(Boom()))
    with pytest.raises(RunFileError):
        load_run(p)
    assert not (tmp_path / "pwned").exists()


def test_oversized_array_shape_is_refused_before_allocating(tmp_path):
    doc = _good()
    doc["metrics"]["train/loss"]["value"] = {"dtype": "float64", "shape": [1 << 30, 1 << 30], "b64": ""}
    run = load_run(_write(tmp_path, doc))
    assert any("elements is more than" in p for p in run.problems)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=30)
keys = st.sampled_from(["schema", "name", "status", "finite", "progress", "metrics", "histograms", "arrays",
                        "confusions", "snapshots", "epochs", "config", "meta", "problems"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.dictionaries(keys, json_values, max_size=10), valid_schema=st.booleans())
def test_fuzzed_run_json_loads_or_raises_run_file_error(tmp_path, doc, valid_schema):
    if valid_schema:
        doc["schema"] = RUN_SCHEMA
    p = _write(tmp_path, doc)
    try:
        run = load_run(p)
    except RunFileError:
        return
    assert isinstance(run.problems, list)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.dictionaries(st.sampled_from(["t", "step", "values", "name", "counts", "lo", "hi",
                                                         "array", "matrix", "key", "status", "finite"]),
                                        json_values, max_size=6), max_size=8),
       cut=st.integers(0, 400))
def test_fuzzed_logs_load_or_raise_run_file_error(tmp_path, records, cut):
    header = encode_line({"t": "header", "schema": "caliper-log/1", "name": "f"})
    body = b"".join(encode_line(r) for r in records)
    p = tmp_path / "log.jsonl"
    p.write_bytes(header + body[:len(body) - cut if cut < len(body) else len(body)])
    try:
        run = load_run(p)
    except RunFileError:
        return
    assert run.status in ("running", "complete", "nonfinite", "interrupted", "failed")


# -- run.json (caliper-run/2 and /3) with its arrays in a memory-mapped sidecar ---------------------------
def _fields(run) -> dict:
    """Everything a Run holds, as comparable plain values."""
    import dataclasses

    def plain(v):
        if isinstance(v, np.ndarray):
            return ("array", np.dtype(v.dtype).newbyteorder("=").str, v.shape, v.tobytes())
        if dataclasses.is_dataclass(v):
            return plain(dataclasses.asdict(v))
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    skip = ("_tables", "source")
    return {f.name: plain(getattr(run, f.name)) for f in dataclasses.fields(run) if f.name not in skip}


def _rich_doc() -> dict:
    from caliper_vk.record.log import encode_array

    steps = np.arange(0, 50, dtype=np.int64)
    return {"schema": "caliper-run/1", "name": "r", "status": "complete", "finite": True,
            "config": {"b64": "QUJD", "arr": encode_array(np.arange(3)), "s": '"b64": "x"', "at": 3},
            "meta": {"steps_per_epoch": 10},
            "progress": {"step": encode_array(steps), "epoch": encode_array(steps / 10),
                         "time": encode_array(steps * 0.5)},
            "metrics": {"train/loss": {"step": encode_array(steps), "value": encode_array(1.0 / (steps + 1)),
                                       "placeholder_steps": [0]},
                        "val/loss": {"step": encode_array(steps[::10]), "value": [0.5, 0.4, 0.3, 0.2, 0.1]},
                        "b/x": {"step": encode_array(steps[::-1]), "value": encode_array(steps[::-1] * 2.0)},
                        "c/y": {"step": encode_array(steps.astype(np.float64)), "value": encode_array(steps)}},
            "histograms": {"w": [{"step": 1, "lo": -3, "hi": 3, "counts": encode_array(np.arange(7)),
                                  "below": 0, "above": 1}]},
            "arrays": {"a": [{"step": 2, "module": "m", "array": encode_array(np.ones((2, 3), np.float32))},
                             {"step": 3, "array": encode_array(np.zeros((0,), np.float32))}]},
            "confusions": {"c": [{"step": 1, "matrix": encode_array(np.eye(3, dtype=np.int64))}]},
            "problems": ["plain"]}


def _v1_and_v2(tmp_path):
    """The same run as a caliper-run/1 file (base64 in the JSON) and as a /2 pair."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    old = load_run(_write(tmp_path / "v1", _rich_doc()))
    new = load_run(old.save(tmp_path / "v2" / "run.json"))
    return old, new


def test_sidecar_run_equals_the_base64_run(tmp_path):
    old, new = _v1_and_v2(tmp_path)
    assert _fields(new) == _fields(old)
    assert new.config == _rich_doc()["config"]  # keys named "b64" or "at" outside arrays keep their values
    assert new.metrics["train/loss"].step is new.progress_step  # one shared step column
    assert new.metrics["c/y"].step is new.progress_step and new.metrics["b/x"].step is new.progress_step
    value = new.metrics["train/loss"].value
    assert not value.flags.writeable and not value.flags.owndata  # a view of the mapping, not a copy
    doc = json.loads((tmp_path / "v2" / "run.json").read_text())
    assert doc["schema"] == RUN_SCHEMA and '"b64"' not in json.dumps(doc["metrics"])
    assert isinstance(doc["histograms"]["w"], dict)  # caliper-run/3: a histogram's frames as columns


def test_saving_again_replaces_the_sidecar(tmp_path):
    old, _ = _v1_and_v2(tmp_path)
    path = tmp_path / "v2" / "run.json"
    first = json.loads(path.read_text())["data"]["file"]
    old.save(path)
    second = json.loads(path.read_text())["data"]["file"]
    assert first != second and [p.name for p in path.parent.glob("run-*.bin")] == [second]
    assert _fields(load_run(path)) == _fields(old)


@pytest.mark.parametrize("damage, message", [
    ("missing", "its arrays' file run-.*bin is missing"),
    ("short", "has .* bytes, the run says"),
    ("magic", "is not a Caliper array file"),
    ("name", "data.file: expected the name of a .bin file"),
])
def test_a_damaged_sidecar_is_named(tmp_path, damage, message):
    _v1_and_v2(tmp_path)
    path = tmp_path / "v2" / "run.json"
    doc = json.loads(path.read_text())
    side = path.parent / doc["data"]["file"]
    if damage == "missing":
        side.unlink()
    elif damage == "short":
        side.write_bytes(side.read_bytes()[:-9])
    elif damage == "magic":
        side.write_bytes(b"x" * side.stat().st_size)
    else:
        doc["data"]["file"] = "../../etc/passwd.bin"
        path.write_text(json.dumps(doc))
    with pytest.raises(RunFileError, match=message):
        load_run(path)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.one_of(st.integers(-10, 1 << 40), st.just("7"), st.none()),
       shape=st.one_of(st.lists(st.integers(0, 1 << 20), max_size=3), st.just("x")),
       dtype=st.sampled_from(["float64", "int64", "uint8", "complex128", "object"]),
       field=st.sampled_from(["progress.step", "metrics.train/loss.value", "arrays.a.0.array",
                              "confusions.c.0.matrix", "histograms.w.counts", "histograms.w.edges"]))
def test_fuzzed_sidecar_references_load_or_raise_run_file_error(tmp_path, at, shape, dtype, field):
    """A reference that points outside the sidecar, has a strange shape or dtype, loads with the
    entry reported missing, or raises RunFileError; never anything else, never out of bounds.
    (A reference that is in bounds and well formed is a valid array and loads.)"""
    import tempfile

    d = Path(tempfile.mkdtemp(dir=tmp_path))
    old = load_run(_write(d, _rich_doc(), "v1.json"))
    path = old.save(d / "run.json")
    doc = json.loads(path.read_text())
    node = doc
    parts = field.split(".")
    for k in parts[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    node[parts[-1]] = {"dtype": dtype, "shape": shape, "at": at}
    path.write_text(json.dumps(doc))
    try:
        run = load_run(path)
    except RunFileError:
        return
    size = (path.parent / doc["data"]["file"]).stat().st_size
    valid = (isinstance(at, int) and isinstance(shape, list) and dtype in ("float64", "int64", "uint8")
             and 19 <= at and at + np.prod(shape, dtype=np.int64) * np.dtype(dtype).itemsize <= size)
    reported = any(p.startswith("run.json." + field.split(".")[0]) for p in run.problems)
    assert valid or reported, run.problems


# -- caliper-run/3: a histogram's frames as columns ------------------------------------------------
def _histogram_run():
    """A run whose histograms have frames recorded out of order, bins that change between
    frames, non-uniform edges and out-of-range counts."""
    from caliper_vk.record.run import HistFrame, Run

    run = Run(name="h", status="complete", ended=True)
    rng = np.random.default_rng(5)
    frames = []
    for step in (30, 10, 20, 40):
        bins = 4 if step < 25 else 6
        edges = np.cumsum(rng.uniform(0.1, 1.0, bins + 1)) - 2.0
        frames.append(HistFrame(step, edges, rng.integers(0, 50, bins), step % 3, step % 5, step % 2, 1))
    run.histograms["w"] = frames
    run.histograms["uniform"] = [HistFrame(s, np.linspace(-3, 3, 13), np.arange(12) + s)
                                 for s in range(0, 500, 5)]
    run.histograms["empty"] = []
    return run


def test_histogram_columns_round_trip_every_frame(tmp_path):
    run = _histogram_run()
    path = run.save(tmp_path / "run.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == "caliper-run/3" and set(doc["histograms"]["w"]) == {
        "step", "bins", "counts", "edges", "below", "above", "nan", "inf"}
    back = load_run(path)
    assert back.problems == []
    want = type(run)(name="h", histograms={k: sorted(v, key=lambda f: f.step)
                                           for k, v in run.histograms.items() if v})
    assert _fields(back)["histograms"] == _fields(want)["histograms"]
    assert [f.step for f in back.histograms["w"]] == [10, 20, 30, 40]  # sorted by step
    assert [len(f.counts) for f in back.histograms["w"]] == [4, 4, 6, 6]
    f = back.histograms["w"][2]
    assert (f.below, f.above, f.nan, f.inf) == (0, 0, 0, 1)
    assert not f.counts.flags.owndata  # a view of the memory-mapped sidecar, not a copy


def test_a_caliper_run_2_file_with_frames_one_object_each_still_opens(tmp_path, monkeypatch):
    from caliper_vk.record import runfile

    run = _histogram_run()
    monkeypatch.setattr(runfile, "RUN_SCHEMA", "caliper-run/2")
    path = run.save(tmp_path / "run.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == "caliper-run/2" and isinstance(doc["histograms"]["w"], list)
    monkeypatch.undo()
    (tmp_path / "v3").mkdir()
    v3 = run.save(tmp_path / "v3" / "run.json")
    assert _fields(load_run(path))["histograms"] == _fields(load_run(v3))["histograms"]


@pytest.mark.parametrize("column, value, problem", [
    ("bins", [4, 4, 6], "one bin count"),
    ("bins", [4, 0, 6, 6], "one bin count"),
    ("counts", [1, 2, 3], "values for 20 bins"),
    ("counts", [-1] * 20, "non-negative integers"),
    ("edges", [0.0] * 24, "finite and increasing"),
    ("edges", [1.0] * 3, "bins + 1 per frame"),
    ("step", [1, -2, 3, 4], "non-negative integers"),
    ("below", [1, 2], "values for 4 frames"),
    ("step", "x", "expected an array object"),
])
def test_bad_histogram_columns_leave_that_histogram_out_and_say_which_column(tmp_path, column, value, problem):
    path = _histogram_run().save(tmp_path / "run.json")
    doc = json.loads(path.read_text())
    doc["histograms"]["w"][column] = value
    path.write_text(json.dumps(doc))
    run = load_run(path)
    assert "w" not in run.histograms and len(run.histograms["uniform"]) == 100  # the rest loads
    assert any(p.startswith(f"run.json.histograms['w'].{column}") and problem in p
               and "histogram 'w' is missing" in p for p in run.problems), run.problems
