"""GPU timestamps: where a frame's time goes, pass by pass.

A :class:`Profiler` owns a timestamp query pool. While a canvas is profiled,
its recorders write a timestamp after each pass they mark (``rec.mark(name)``);
:meth:`Profiler.read` turns the last completed frame's timestamps into
milliseconds per pass. It is for benchmarks and for explaining a slow frame
("profile it with Vulkan timestamps"), and for the overhead budget on a CPU
device, which counts every frame's execution (:meth:`Profiler.total_ms`: one
call straight to the loader, no list). It is off unless asked for.
"""

from __future__ import annotations

import vulkan as vk

from ._vk import ffi, new
from .device import Device


class Profiler:
    """Timestamp queries for one canvas. States: live → closed."""

    def __init__(self, device: Device, capacity: int = 128):
        self.device = device
        self.capacity = capacity
        self.period_ns = device.info.timestamp_period_ns
        self.handle = vk.vkCreateQueryPool(
            device.handle,
            new("VkQueryPoolCreateInfo", queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=capacity),
            None)
        self.labels: list[str] = []
        self._ticks = ffi.new("uint64_t[]", capacity)  # read into, frame after frame

    def begin(self, rec) -> None:
        """Start a frame's record: reset the pool and write the first timestamp."""
        self.labels = []
        vk.vkCmdResetQueryPool(rec.handle, self.handle, 0, self.capacity)
        self.write(rec, "start")

    def write(self, rec, label: str, reset: bool = False) -> None:
        """Write the next timestamp; ``reset`` resets its query first (a command buffer that may
        run again without the frame's reset before it: a canvas's stand-alone readback)."""
        if len(self.labels) >= self.capacity:
            return
        if reset:
            vk.vkCmdResetQueryPool(rec.handle, self.handle, len(self.labels), 1)
        vk.vkCmdWriteTimestamp(rec.handle, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.handle,
                               len(self.labels))
        self.labels.append(label)

    def read(self, count: int | None = None) -> list[tuple[str, float]]:
        """``(label, ms since the previous mark)`` for the last completed frame (its first
        ``count`` marks: a frame without readback never writes the last one)."""
        n = len(self.labels) if count is None else min(count, len(self.labels))
        if n < 2 or not self._read(n):
            return []
        ticks = self._ticks[0:n]
        return [(self.labels[i], (ticks[i] - ticks[i - 1]) * self.period_ns / 1e6)
                for i in range(1, n)]

    def total_ms(self, count: int | None = None) -> float:
        """Milliseconds from the last completed frame's first timestamp to its last (of its first
        ``count``): the sum of :meth:`read`'s, 0.0 when not written yet."""
        n = len(self.labels) if count is None else min(count, len(self.labels))
        if n < 2 or not self._read(n):
            return 0.0
        return (self._ticks[n - 1] - self._ticks[0]) * self.period_ns / 1e6

    def _read(self, n: int) -> bool:
        """The first ``n`` timestamps into ``_ticks``; False when they are not all written."""
        result = vk.lib.vkGetQueryPoolResults(self.device.handle, self.handle, 0, n, n * 8, self._ticks, 8,
                                              vk.VK_QUERY_RESULT_64_BIT)
        if result == vk.VK_NOT_READY:
            return False
        if result != vk.VK_SUCCESS:
            raise vk.exception_codes[result]
        return True

    def close(self) -> None:
        if self.handle is None:
            return
        handle, self.handle = self.handle, None
        dev = self.device.handle
        self.device.retire(lambda: vk.vkDestroyQueryPool(dev, handle, None))
