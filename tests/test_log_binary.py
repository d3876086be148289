"""The run log is opened in binary mode: on Windows a descriptor opened without ``O_BINARY`` writes
every "\\n" as "\\r\\n", and the reader then skips every record ("no checksum"). Simulated here: an
``os`` whose descriptors translate line ends unless opened with ``O_BINARY``."""

import os
import types

import pytest

from caliper_vk.record import log

O_BINARY = 0x8000  # the value Windows uses


def windows_like_os():
    """``os`` as the log module sees it on Windows: text-mode descriptors unless O_BINARY."""
    text_mode: set[int] = set()

    def open_(path, flags, mode=0o777):
        fd = os.open(path, flags & ~O_BINARY, mode)
        if not flags & O_BINARY:
            text_mode.add(fd)
        return fd

    def write(fd, data):
        data = bytes(data)
        if fd in text_mode:
            os.write(fd, data.replace(b"\n", b"\r\n"))
            return len(data)
        return os.write(fd, data)

    fake = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    fake.open, fake.write, fake.O_BINARY = open_, write, O_BINARY
    return fake


def test_the_log_reads_back_whole_where_descriptors_translate_line_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(log, "os", windows_like_os())
    path = tmp_path / "log.jsonl"
    writer = log.LogWriter(path, {"name": "win"})
    for step in range(3):
        writer.write({"t": "scalar", "step": step, "loss": 1.0 / (step + 1)})
    writer.close()
    assert b"\r" not in path.read_bytes()
    contents = log.read_log(path)
    assert contents.problems == [] and len(contents.records) == 3


def test_the_simulation_translates_a_text_mode_descriptor(tmp_path):
    """Negative control: a descriptor opened without O_BINARY gets "\\r\\n" and the reader skips
    its records, so the test above would catch a writer that drops the flag."""
    fake = windows_like_os()
    path = tmp_path / "log.jsonl"
    fd = fake.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    for record in ({"t": "header", "schema": log.LOG_SCHEMA}, {"t": "scalar", "step": 0}):
        fake.write(fd, log.encode_line(record))
    os.close(fd)
    assert path.read_bytes().count(b"\r\n") == 2
    with pytest.raises(log.RunFileError, match="no header"):  # every line, the header too, skipped
        log.read_log(path)
