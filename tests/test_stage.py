"""Staging (record/stage.py): values on their way from a device are written once arrived, in the order they
were put, never waited for on a step; a record with no device value waits its turn behind them."""

from __future__ import annotations

import torch

from caliper_vk.record import Recorder, load_run, stage


class _Event:
    """A device copy that arrives when the test says so; waits are counted."""

    def __init__(self, clock):
        self.clock, self.waited = clock, 0

    def query(self):
        return self.clock["done"]

    def synchronize(self):
        self.waited += 1
        self.clock["done"] = True


def _fake_device(monkeypatch):
    clock = {"done": False}
    events = []

    def to_host(t):
        events.append(_Event(clock))
        return t.detach().clone(), events[-1]

    monkeypatch.setattr(stage, "_to_host", to_host)
    return clock, events


def test_values_are_written_when_they_arrive_in_order(tmp_path, monkeypatch):
    clock, events = _fake_device(monkeypatch)
    rec = Recorder(tmp_path / "r")
    rec.log(train_loss=torch.tensor(2.0), step=1)  # on its way
    rec.log(lr=0.1, step=1)  # no device value: waits its turn behind the loss
    rec.log(train_loss=torch.tensor(1.0), step=2)
    assert len(rec._stage) == 3 and not any(e.waited for e in events)  # nothing waited for
    rec.poll()
    assert len(rec._stage) == 3  # not arrived: nothing written, nothing waited for
    clock["done"] = True
    rec.poll()
    assert len(rec._stage) == 0
    rec.close()
    run = load_run(tmp_path / "r")
    assert run.metrics["train/loss"].value.tolist() == [2.0, 1.0] and run.metrics["lr"].step.tolist() == [1]
    lines = (tmp_path / "r" / "log.jsonl").read_text().splitlines()
    order = [k for line in lines if '"scalars"' in line for k in ("train/loss", "lr") if f'"{k}"' in line]
    assert order == ["train/loss", "lr", "train/loss"]  # the log keeps the order of the calls


def test_close_waits_for_what_is_on_its_way_and_the_queue_is_bounded(tmp_path, monkeypatch):
    clock, events = _fake_device(monkeypatch)
    rec = Recorder(tmp_path / "r")
    for step in range(stage.MAX_IN_FLIGHT):
        rec.log(train_loss=torch.tensor(float(step)), step=step)
    assert not any(e.waited for e in events)
    rec.log(train_loss=torch.tensor(99.0), step=99)  # one more than may be on its way: the oldest is waited for
    assert events[0].waited == 1
    clock["done"] = False
    rec.log(train_loss=torch.tensor(7.0), step=100)
    rec.close()  # waits for the last one
    assert len(load_run(tmp_path / "r").metrics["train/loss"]) == stage.MAX_IN_FLIGHT + 2


class _Work:
    """A collective (``all_reduce(async_op=True)``) still writing a CPU tensor until the test says so."""

    def __init__(self):
        self.done, self.waited = False, 0

    def is_completed(self):
        return self.done

    def wait(self):
        self.waited += 1
        self.done = True
        return True


def test_a_cpu_value_still_written_by_a_collective_waits_for_it(tmp_path):
    rec = Recorder(tmp_path / "r")
    vector, work, got = torch.zeros(2), _Work(), []
    rec.stage(vector, lambda v: got.append(v.tolist()), works=(work,))
    rec.log({"x": 1.0}, step=1)  # behind it, in order
    rec.poll()
    assert got == [] and work.waited == 0  # not read while the reduction may still write it
    vector += 3.0  # (the reduction's result)
    work.done = True
    rec.poll()
    assert got == [[3.0, 3.0]]
    rec.stage(torch.ones(1), got.append, works=(_Work(),))
    rec.close()  # close waits for the work
    assert len(got) == 2 and list(load_run(tmp_path / "r").metrics["x"].value) == [1.0]
