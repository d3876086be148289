"""A private X server for window tests: ``with xvfb() as display: ...`` sets ``DISPLAY``."""

from __future__ import annotations

import contextlib
import os
import subprocess


class Display(str):
    """The display name (``":5"``); ``.server`` is the Xvfb process (to kill it in a test)."""

    server: subprocess.Popen


@contextlib.contextmanager
def xvfb(screen: str = "1280x1024x24"):
    """Start Xvfb on a free display (it writes the number once it is ready), point ``DISPLAY``
    at it for the block, then restore ``DISPLAY`` and stop the server. Yields the display
    name (a :class:`Display`)."""
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", screen, "-nolisten", "tcp"],
                            pass_fds=(w,), stderr=subprocess.DEVNULL)
    os.close(w)
    number = b""
    while not number.endswith(b"\n"):
        chunk = os.read(r, 16)
        if not chunk:
            break
        number += chunk
    os.close(r)
    name = Display(f":{number.decode().strip()}")
    name.server = proc
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = name
    try:
        yield name
    finally:
        if old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = old
        proc.terminate()
        proc.wait(timeout=10)
