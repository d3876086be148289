"""The device memory Caliper holds, and ``Session(device_memory=...)``'s cap on it.

The engine counts every allocation it makes on a device (``Device.memory_stats``:
canvases, copies of on-device-copy panels, the history's ring, the views' buffers;
imports of tensors read in place apart). On a GPU the status line shows the total;
with a cap, the history's ring grows only within it (:class:`~.history.History`) and
gives its memory up first when Caliper is over it, and an ``attach`` still over it is
refused (:func:`fit_device_memory`).
"""

from __future__ import annotations


def megabytes(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n >= 10**6 else f"{n / 1e3:.0f} kB"


class DeviceMemoryError(RuntimeError):
    """A panel would make Caliper hold more device memory than ``Session(device_memory=)``."""


def fit_device_memory(device, history, cap: int | None, what: str) -> None:
    """``Session(device_memory=cap)`` after ``what`` allocated: over the cap, the history gives
    its ring up first (it grows again within what is left); still over, raise
    :class:`DeviceMemoryError` (the caller undoes ``what``). Call with the device idle."""
    if cap is None:
        return
    stats = device.memory_stats
    device.collect()  # what was released waits for nothing now: count it out
    if stats["allocated_bytes"] > cap and history is not None and history.chunks:
        history.clear()
        device.collect()
    if stats["allocated_bytes"] > cap:
        raise DeviceMemoryError(
            f"{what} makes Caliper hold {megabytes(stats['allocated_bytes'])} of device memory, over "
            f"device_memory={megabytes(cap)} (the history has given its memory up already); raise "
            "device_memory=, draw a smaller window, or attach less")
