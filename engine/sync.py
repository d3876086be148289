"""Timeline semaphores: the ordering primitive of the live-attach protocol.

A :class:`TimelineSemaphore` carries a 64-bit counter that only grows. The
GPU waits for and signals values inside :meth:`Device.submit`; the host can
signal, wait and read it here. The protocol built on it (producer signals
``2k+1``, renderer signals ``2k+2``) is described in ``docs/contract.md``.
"""

from __future__ import annotations

import vulkan as vk

from ._vk import UINT64_MAX, ffi, new
from .device import Device


class TimelineSemaphore:
    """A ``VK_SEMAPHORE_TYPE_TIMELINE`` semaphore. States: live → closed."""

    def __init__(self, device: Device, initial: int = 0):
        if not device.features["timeline_semaphore"]:
            raise RuntimeError(f"{device.info.name} does not support timeline semaphores")
        self.device = device
        type_info = new(
            "VkSemaphoreTypeCreateInfo",
            semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE,
            initialValue=initial,
        )
        self.handle = vk.vkCreateSemaphore(
            device.handle, new("VkSemaphoreCreateInfo", pNext=type_info), None
        )

    @property
    def value(self) -> int:
        out = ffi.new("uint64_t *")
        vk.vkGetSemaphoreCounterValue(self.device.handle, self.handle, out)
        return int(out[0])

    def signal(self, value: int) -> None:
        """Signal ``value`` from the host."""
        vk.vkSignalSemaphore(
            self.device.handle, new("VkSemaphoreSignalInfo", semaphore=self.handle, value=value)
        )

    def wait(self, value: int, timeout_ns: int = UINT64_MAX) -> bool:
        """Block until the counter reaches ``value``; False on timeout."""
        info = new(
            "VkSemaphoreWaitInfo",
            semaphoreCount=1,
            pSemaphores=[self.handle],
            pValues=[value],
        )
        try:
            vk.vkWaitSemaphores(self.device.handle, info, timeout_ns)
        except vk.VkTimeout:
            return False
        return True

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, self.handle = self.handle, None
        dev = self.device.handle
        self.device.retire(lambda: vk.vkDestroySemaphore(dev, handle, None))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
