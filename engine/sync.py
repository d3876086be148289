"""Timeline semaphores: the ordering primitive of the live-attach protocol.

A :class:`TimelineSemaphore` carries a 64-bit counter that only grows. The
GPU waits for and signals values inside :meth:`Device.submit`; the host can
signal, wait and read it here. The write/read protocol built on it (every
write's exit and every frame's read take the next value) is described in
``docs/contract.md``.

``TimelineSemaphore(device, export="opaque-fd")`` (or ``"opaque-win32"``) makes
the semaphore exportable (``VkExportSemaphoreCreateInfo``) so CUDA can import it
as a timeline semaphore and wait/signal it on a stream; :meth:`export_handle`
returns a new fd / Win32 handle each call, owned by the caller (an import into
CUDA consumes an fd on success; see ``engine/external.py`` for the rules).
"""

from __future__ import annotations

import vulkan as vk

from ._vk import UINT64_MAX, device_proc, ffi, new
from .device import Device

# kind -> (semaphore handle type bit, device extension, handle getter, get-info struct)
SEMAPHORE_HANDLES = {
    "opaque-fd": (vk.VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT, "VK_KHR_external_semaphore_fd",
                  "vkGetSemaphoreFdKHR", "VkSemaphoreGetFdInfoKHR"),
    "opaque-win32": (vk.VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32_BIT,
                     "VK_KHR_external_semaphore_win32", "vkGetSemaphoreWin32HandleKHR",
                     "VkSemaphoreGetWin32HandleInfoKHR"),
}


class SemaphoreExportError(RuntimeError):
    """The device cannot share a timeline semaphore as asked; the message says why."""


def timeline_export_supported(device: Device, kind: str) -> str | None:
    """None when timeline semaphores can be exported as ``kind`` handles, else the reason."""
    if kind not in SEMAPHORE_HANDLES:
        return f"unknown handle kind {kind!r}; one of {tuple(SEMAPHORE_HANDLES)}"
    bit, ext, _, _ = SEMAPHORE_HANDLES[kind]
    if ext not in device.extensions:
        return f"{device.info.name} lacks {ext}"
    if not device.features["timeline_semaphore"]:
        return f"{device.info.name} does not support timeline semaphores"
    timeline = new("VkSemaphoreTypeCreateInfo", semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE)
    info = new("VkPhysicalDeviceExternalSemaphoreInfo", pNext=timeline, handleType=bit)
    props = new("VkExternalSemaphoreProperties")
    vk.vkGetPhysicalDeviceExternalSemaphoreProperties(device.info.handle, info, props)
    if not props.externalSemaphoreFeatures & vk.VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT:
        return f"{device.info.name} cannot export timeline semaphores as {kind} handles"
    return None


class TimelineSemaphore:
    """A ``VK_SEMAPHORE_TYPE_TIMELINE`` semaphore. States: live → closed.

    ``export`` (``"opaque-fd"`` / ``"opaque-win32"``) makes it shareable with CUDA.
    """

    def __init__(self, device: Device, initial: int = 0, export: str | None = None):
        if not device.features["timeline_semaphore"]:
            raise RuntimeError(f"{device.info.name} does not support timeline semaphores")
        self.device = device
        self.export_kind = export
        export_info = None
        if export is not None:
            why = timeline_export_supported(device, export)
            if why:
                raise SemaphoreExportError(f"cannot share a timeline semaphore: {why}; update the GPU "
                                           "driver (NVIDIA exports opaque fd / Win32 timelines)")
            export_info = new("VkExportSemaphoreCreateInfo", handleTypes=SEMAPHORE_HANDLES[export][0])
        type_info = new(
            "VkSemaphoreTypeCreateInfo",
            pNext=export_info,
            semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE,
            initialValue=initial,
        )
        try:
            self.handle = vk.vkCreateSemaphore(
                device.handle, new("VkSemaphoreCreateInfo", pNext=type_info), None
            )
        except vk.VkError as exc:
            if export is None:
                raise
            raise SemaphoreExportError(f"vkCreateSemaphore refused an exportable timeline semaphore "
                                       f"({type(exc).__name__})") from exc
        self._signal_info = None

    @property
    def value(self) -> int:
        out = ffi.new("uint64_t *")
        vk.vkGetSemaphoreCounterValue(self.device.handle, self.handle, out)
        return int(out[0])

    def signal(self, value: int) -> None:
        """Signal ``value`` from the host (every frame of a live panel: straight to the loader,
        with one reused struct)."""
        info = self._signal_info
        if info is None:
            info = self._signal_info = new("VkSemaphoreSignalInfo", semaphore=self.handle)
        info.value = value
        result = vk.lib.vkSignalSemaphore(self.device.handle, info)
        if result != vk.VK_SUCCESS:
            raise vk.exception_codes[result]

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

    def export_handle(self) -> int:
        """A new fd / Win32 handle to the semaphore's payload; the caller owns it."""
        if self.export_kind is None:
            raise SemaphoreExportError("this semaphore was not created exportable (export=...)")
        bit, _, getter, struct = SEMAPHORE_HANDLES[self.export_kind]
        dev = self.device.handle
        try:
            out = device_proc(dev, getter)(dev, new(struct, semaphore=self.handle, handleType=bit))
        except vk.VkError as exc:  # e.g. VkErrorTooManyObjects: the process is out of fds
            raise SemaphoreExportError(f"{getter} failed ({type(exc).__name__})") from exc
        return int(out) if self.export_kind == "opaque-fd" else int(ffi.cast("uintptr_t", out))

    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        handle, self.handle = self.handle, None
        if self.device.handle is None:  # the device is gone (interpreter shutdown)
            return
        dev = self.device.handle
        self.device.retire(lambda: vk.vkDestroySemaphore(dev, handle, None))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
