"""Counting the process's open OS handles, for leak tests on every platform.

Linux lists its file descriptors in ``/proc/self/fd``, macOS in ``/dev/fd``; Windows exports memory
and semaphores as NT handles, which ``GetProcessHandleCount`` counts. Where none of these answers,
``open_handles()`` is None and a leak test skips with :data:`NO_COUNT`.
"""

from __future__ import annotations

import os
import sys

NO_COUNT = ("n/a on this platform: no way to count open handles here (/proc/self/fd, /dev/fd or "
            "kernel32.GetProcessHandleCount)")


def _windows_count() -> int | None:
    import ctypes
    from ctypes import wintypes

    try:
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        kernel32.GetCurrentProcess.restype = wintypes.HANDLE
        kernel32.GetProcessHandleCount.argtypes = [wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD)]
        kernel32.GetProcessHandleCount.restype = wintypes.BOOL
    except (OSError, AttributeError):
        return None
    count = wintypes.DWORD()
    if not kernel32.GetProcessHandleCount(kernel32.GetCurrentProcess(), ctypes.byref(count)):
        return None
    return int(count.value)


def open_handles() -> int | None:
    """Open file descriptors (Linux, macOS) or NT handles (Windows) of this process, or None."""
    if sys.platform == "win32":
        return _windows_count()
    for folder in ("/proc/self/fd", "/dev/fd"):
        if os.path.isdir(folder):
            return len(os.listdir(folder))
    return None


CAN_COUNT = open_handles() is not None
