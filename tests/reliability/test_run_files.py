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


# -- run.json read with its base64 columns decoded as they stream past ----------------------------
def _fields(run) -> dict:
    """Everything a Run holds, as comparable plain values."""
    import dataclasses

    def plain(v):
        if isinstance(v, np.ndarray):
            return ("array", v.dtype.str, v.shape, v.tobytes())
        if dataclasses.is_dataclass(v):
            return plain(dataclasses.asdict(v))
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    return {f.name: plain(getattr(run, f.name)) for f in dataclasses.fields(run) if f.name not in ("_tables",)}


def _both_ways(path, monkeypatch, chunk=None):
    """The run as read by the streaming reader (with ``chunk``-byte reads) and by plain json.loads."""
    from caliper_vk.record import load as run_mod

    if chunk:
        monkeypatch.setattr(run_mod, "_READ_CHUNK", chunk)
    fast = load_run(path)
    monkeypatch.setattr(run_mod, "_split_payloads", lambda p: None)
    plain = load_run(path)
    monkeypatch.undo()
    return fast, plain


def _rich_doc() -> dict:
    from caliper_vk.record.log import encode_array

    steps = np.arange(0, 50, dtype=np.int64)
    return {"schema": RUN_SCHEMA, "name": "r", "status": "complete", "finite": True,
            "config": {"b64": "QUJD", "arr": encode_array(np.arange(3)), "s": '"b64": "x"', "n": [{"b64": ""}]},
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
            "problems": [{"b64": "QQ=="}, "plain"]}


@pytest.mark.parametrize("dump", [
    lambda d: json.dumps(d, separators=(",", ":")),  # as Run.save writes it
    json.dumps,  # "b64": "..." with a space
    lambda d: json.dumps(d, indent=2).replace('"b64":', '"b64" \n\t:'),
])
@pytest.mark.parametrize("chunk", [None, 5, 64, 1000])
def test_streaming_read_equals_plain_json(tmp_path, monkeypatch, dump, chunk):
    p = tmp_path / "run.json"
    p.write_text(dump(_rich_doc()))
    from caliper_vk.record.load import _split_payloads

    assert len(_split_payloads(p)[1]) == 18  # every "b64" string taken out, config and problems too
    fast, plain = _both_ways(p, monkeypatch, chunk)
    assert _fields(fast) == _fields(plain)
    assert fast.config == _rich_doc()["config"]  # a "b64" key outside an array keeps its text
    assert fast.metrics["train/loss"].step is fast.progress_step  # one shared step column
    assert fast.metrics["c/y"].step is fast.progress_step and fast.metrics["b/x"].step is fast.progress_step


@pytest.mark.parametrize("b64", ["QR==", "QQ", "!!", "\\u0041AAA", "AAAA AAAA", 'QUJD\\"', ""])
def test_streaming_read_falls_back_on_unusual_base64(tmp_path, monkeypatch, b64):
    """Text that is not plain canonical base64 leaves the file to json.loads and decode_array:
    the same run, the same problems, the same errors."""
    doc = _rich_doc()
    doc["metrics"]["train/loss"]["value"] = {"dtype": "uint8", "shape": [1], "b64": "PLACEHOLDER"}
    text = json.dumps(doc).replace("PLACEHOLDER", b64)
    p = tmp_path / "run.json"
    p.write_text(text)
    from caliper_vk.record.load import _split_payloads

    assert (_split_payloads(p) is None) == (b64 != "")
    try:
        fast, plain = _both_ways(p, monkeypatch)
    except RunFileError as exc:
        with pytest.raises(RunFileError, match="not JSON"):
            json.loads(text)
        assert "not JSON" in str(exc)
        return
    assert _fields(fast) == _fields(plain)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.dictionaries(keys | st.just("b64"), json_values | st.sampled_from(["QUJD", "QQ==", "", "QR=="]),
                           max_size=8),
       chunk=st.sampled_from([3, 17, 1 << 24]))
def test_fuzzed_streaming_read_equals_plain_json(tmp_path, monkeypatch, doc, chunk):
    doc["schema"] = RUN_SCHEMA
    doc.setdefault("config", {"b64": "QUJD", "x": {"b64": doc.get("b64", "")}})
    p = _write(tmp_path, doc)
    try:
        fast, plain = _both_ways(p, monkeypatch, chunk)
    except RunFileError:
        return  # (both raise: _both_ways reads the fast way first, and a file is one or the other)
    assert _fields(fast) == _fields(plain)
