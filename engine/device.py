"""Logical device, queue, submissions and deferred destruction.

Feature negotiation: the engine asks for Vulkan 1.2's timeline semaphores and
64-bit buffer atomics when the device has them, and for every optional
extension in :data:`~.instance.OPTIONAL_DEVICE_EXTENSIONS` it advertises
(``VK_KHR_portability_subset`` must be enabled whenever it is advertised).
Both come from the instance's :class:`PhysicalDeviceInfo`, so a device profile
(:mod:`.profiles`) that hides a feature or an extension keeps it disabled here.
What was enabled is recorded in :attr:`Device.features` and
:attr:`Device.extensions`; pipelines check the features their SPIR-V needs
(:mod:`.limits`) and say which one is missing.

Deferred release: GPU objects are never destroyed while a submission that may
use them is in flight. :meth:`Device.retire` queues a destroy callback tagged
with the serial of the newest submission; :meth:`Device.collect` (called on
every submit and on close) runs the callbacks whose serial has completed.
"""

from __future__ import annotations

import threading
from collections import deque
from operator import itemgetter

import vulkan as vk

from ._vk import UINT64_MAX, VulkanError, ffi, new
from .instance import OPTIONAL_DEVICE_EXTENSIONS, Instance, NoDeviceError, PhysicalDeviceInfo


# Semaphore waits hold back every stage of the batch that waits.
_WAIT_STAGE = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT


_first, _second = itemgetter(0), itemgetter(1)


def build_submit(batches) -> tuple:
    """``(VkSubmitInfo[], [(wait values, signal values) per batch], keep-alive)`` for
    :meth:`Device.submit_built`; the value arrays are filled in per submission."""
    keep = []
    slots = []
    infos = ffi.new("VkSubmitInfo[]", len(batches))
    for info, (command_buffers, wait, signal) in zip(infos, batches, strict=True):
        info.sType = vk.VK_STRUCTURE_TYPE_SUBMIT_INFO
        cbs = ffi.new("VkCommandBuffer[]", list(command_buffers))
        keep.append(cbs)
        info.commandBufferCount, info.pCommandBuffers = len(cbs), cbs
        wait_values = ffi.new("uint64_t[]", max(1, len(wait)))
        signal_values = ffi.new("uint64_t[]", max(1, len(signal)))
        keep += (wait_values, signal_values)
        slots.append((wait_values, signal_values))
        if not (wait or signal):
            continue
        timeline = ffi.new("VkTimelineSemaphoreSubmitInfo *")
        timeline.sType = vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO
        keep.append(timeline)
        info.pNext = timeline
        if wait:
            handles = ffi.new("VkSemaphore[]", [sem.handle for sem, _ in wait])
            stages = ffi.new("VkPipelineStageFlags[]", [_WAIT_STAGE] * len(wait))
            keep += (handles, stages)
            info.waitSemaphoreCount, info.pWaitSemaphores = len(wait), handles
            info.pWaitDstStageMask = stages
            timeline.waitSemaphoreValueCount = len(wait)
            timeline.pWaitSemaphoreValues = wait_values
        if signal:
            handles = ffi.new("VkSemaphore[]", [sem.handle for sem, _ in signal])
            keep.append(handles)
            info.signalSemaphoreCount, info.pSignalSemaphores = len(signal), handles
            timeline.signalSemaphoreValueCount = len(signal)
            timeline.pSignalSemaphoreValues = signal_values
    return infos, slots, keep


class Device:
    """A ``VkDevice`` with one compute-capable queue. States: open → closed.

    Parameters
    ----------
    instance : Instance, optional
        Borrowed; must outlive the device. A private one is made when omitted
        (and closed with the device).
    choice : str, optional
        Forces the physical device (see :meth:`Instance.select`).
    """

    def __init__(self, instance: Instance | None = None, choice: str | None = None):
        self._own_instance = instance is None
        self.instance = instance or Instance()
        try:
            self.info: PhysicalDeviceInfo = self.instance.select(choice)
            self._create()
        except Exception:
            if self._own_instance:
                self.instance.close()
            raise

    def _create(self) -> None:
        info = self.info
        pd = info.handle
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(pd)
        family = next(
            (i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None
        )
        if family is None:
            raise NoDeviceError(f"{info.name} has no compute queue")
        self.queue_family = family
        # the queue can write timestamps (VUID-vkCmdWriteTimestamp-timestampValidBits-00829)
        self.timestamps = families[family].timestampValidBits > 0
        # A swapchain needs the instance's surface extension (a windowed session asks for it).
        has_surface = "VK_KHR_surface" in self.instance.extensions
        self.extensions = tuple(e for e in OPTIONAL_DEVICE_EXTENSIONS if info.has(e)
                                and (e != "VK_KHR_swapchain" or has_surface))
        # Only what the (profile-adjusted) info reports is enabled: a feature a profile hides
        # stays off here, so the validation layer flags any shader that still uses it.
        f12 = new(
            "VkPhysicalDeviceVulkan12Features",
            timelineSemaphore=int(info.timeline_semaphore),
            shaderBufferInt64Atomics=int(info.buffer_int64_atomics),
        )
        features = new("VkPhysicalDeviceFeatures2", pNext=f12)
        features.features.shaderInt64 = int(info.shader_int64)
        self.features = {
            "timeline_semaphore": info.timeline_semaphore,
            "buffer_int64_atomics": info.buffer_int64_atomics,
            "shader_int64": info.shader_int64,
        }
        queue_info = new(
            "VkDeviceQueueCreateInfo", queueFamilyIndex=family, queueCount=1, pQueuePriorities=[1.0]
        )
        create = new(
            "VkDeviceCreateInfo",
            pNext=features,
            queueCreateInfoCount=1,
            pQueueCreateInfos=[queue_info],
            enabledExtensionCount=len(self.extensions),
            ppEnabledExtensionNames=list(self.extensions) or None,
        )
        self.handle = vk.vkCreateDevice(pd, create, None)
        self.queue = vk.vkGetDeviceQueue(self.handle, family, 0)
        self.memory = vk.vkGetPhysicalDeviceMemoryProperties(pd)
        pool_info = new(
            "VkCommandPoolCreateInfo",
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            queueFamilyIndex=family,
        )
        self.command_pool = vk.vkCreateCommandPool(self.handle, pool_info, None)
        self._lock = threading.RLock()
        self._serial = 0  # serial of the newest submission
        self._inflight: deque = deque()  # (serial, fence)
        self._completed = 0
        self._retired: deque = deque()  # (serial, callback)
        self._free_fences: list = []
        # Every fence ever made, destroyed at close: a KeyboardInterrupt between taking a fence
        # and queueing it (Ctrl-C in a demo) must not leak it past vkDestroyDevice.
        self._all_fences: dict = {}  # fence -> a VkFence[1] array of it, for vkResetFences
        self._submit_structs: dict = {}  # see submit_batches
        # Objects shared per device (built-in pipelines); closed before the device.
        self.cache: dict = {}
        # Live VkDeviceMemory: bytes the engine allocated, and bytes it imported (not copies).
        self.memory_stats = {"allocated_bytes": 0, "allocations": 0, "imported_bytes": 0,
                             "imports": 0}

    # -- memory types --------------------------------------------------------------
    def memory_type(self, type_bits: int, want: int, fallback: int | None = None) -> int:
        """Index of the first memory type allowed by ``type_bits`` with ``want`` flags."""
        for i in range(self.memory.memoryTypeCount):
            flags = self.memory.memoryTypes[i].propertyFlags
            if type_bits & (1 << i) and flags & want == want:
                return i
        if fallback is not None:
            return self.memory_type(type_bits, fallback)
        raise VulkanError(f"no memory type with flags {want:#x} among bits {type_bits:#x}")

    def account(self, nbytes: int, imported: bool = False) -> None:
        """Record a memory allocation (positive) or its release (negative)."""
        key, count = ("imported_bytes", "imports") if imported else ("allocated_bytes", "allocations")
        with self._lock:
            self.memory_stats[key] += nbytes
            self.memory_stats[count] += 1 if nbytes > 0 else -1

    # -- command buffers and submission ------------------------------------------
    def allocate_command_buffer(self):
        info = new(
            "VkCommandBufferAllocateInfo",
            commandPool=self.command_pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            commandBufferCount=1,
        )
        with self._lock:
            return vk.vkAllocateCommandBuffers(self.handle, info)[0]

    def free_command_buffer(self, cb) -> None:
        def free():
            vk.vkFreeCommandBuffers(self.handle, self.command_pool, 1, [cb])

        self.retire(free)

    def _new_fence(self):
        fence = vk.vkCreateFence(self.handle, new("VkFenceCreateInfo"), None)
        self._all_fences[fence] = ffi.new("VkFence[1]", [fence])  # made once: reset every frame
        return fence

    def submit(self, command_buffers, wait=(), signal=()) -> int:
        """Submit and return the submission's serial.

        ``wait`` and ``signal`` are sequences of ``(TimelineSemaphore, value)``;
        waits are at the compute stage. The CPU never waits here.
        """
        return self.submit_batches([(command_buffers, wait, signal)])

    def submit_batches(self, batches) -> int:
        """Submit ``(command_buffers, wait, signal)`` batches in one ``vkQueueSubmit`` (one
        fence, one serial); each batch signals once its own work (and all earlier work) is
        done, as separate submissions would. The CPU never waits here.

        The frame loop calls this every frame with the same command buffers and semaphores:
        the submit structs are built once per such combination (with cffi directly) and
        only the semaphore values change; the call goes straight to the loader. (The
        ``vulkan`` package's generic wrappers and :func:`new` cost tens of microseconds a
        frame; Vulkan copies the structs during the call, so reusing them is safe.)
        """
        # made every frame: one flat key (the semaphores by identity, None between the parts)
        # and the values, with C-level map() rather than Python loops
        key = []
        for cbs, wait, signal in batches:
            key += cbs
            key.append(None)
            key += map(_first, wait)
            key.append(None)
            key += map(_first, signal)
            key.append(None)
        key = tuple(key)
        structs = self._submit_structs.get(key)
        if structs is None:
            if len(self._submit_structs) >= 32:
                self._submit_structs.clear()
            structs = self._submit_structs[key] = build_submit(batches)
        infos, slots = structs[0], structs[1]
        for (_, wait, signal), (wait_values, signal_values) in zip(batches, slots, strict=True):
            if wait:
                wait_values[0:len(wait)] = list(map(_second, wait))
            if signal:
                signal_values[0:len(signal)] = list(map(_second, signal))
        return self.submit_built(infos, len(batches))

    def submit_built(self, infos, count: int) -> int:
        """One ``vkQueueSubmit`` of the ``count`` batches of ``infos`` (:func:`build_submit`, their
        semaphore values filled in by the caller); returns its serial. :meth:`submit_batches` and
        the live session's frame plan (:mod:`caliper_vk.live.plan`) submit through it."""
        with self._lock:
            if self._inflight or self._retired:
                self.collect()
            if self._free_fences:  # a finished submission's fence, reset (the common case)
                fence = self._free_fences.pop()
                if vk.lib.vkResetFences(self.handle, 1, self._all_fences[fence]) != vk.VK_SUCCESS:
                    raise VulkanError("vkResetFences failed")
            else:
                fence = self._new_fence()
            result = vk.lib.vkQueueSubmit(self.queue, count, infos, fence)
            if result != vk.VK_SUCCESS:
                self._free_fences.append(fence)
                raise vk.exception_codes[result]
            self._serial += 1
            self._inflight.append((self._serial, fence))
            return self._serial

    def is_done(self, serial: int) -> bool:
        with self._lock:
            self.collect()
            return serial <= self._completed

    def wait(self, serial: int | None = None, timeout_ns: int = UINT64_MAX) -> None:
        """Block until submission ``serial`` has finished; by default, until the queue is idle.

        Waiting for everything ends by asking the queue, not only the fences this object
        tracks: a Ctrl-C between ``vkQueueSubmit`` and the lines that record its fence (Python
        raises ``KeyboardInterrupt`` as the call returns) leaves work in flight that no fence
        here names, and whatever is destroyed next (a session closing) would still be in use.
        The fences are waited for first, outside the lock (another thread may submit or
        signal meanwhile), so the queue's own wait, under it, returns at once but for such work.
        """
        with self._lock:
            fences = [f for s, f in self._inflight if serial is None or s <= serial]
        if fences:
            vk.vkWaitForFences(self.handle, len(fences), fences, vk.VK_TRUE, timeout_ns)
        if serial is None:
            with self._lock:  # the queue is externally synchronised: no submit meanwhile
                result = vk.lib.vkQueueWaitIdle(self.queue)
            if result != vk.VK_SUCCESS:
                raise vk.exception_codes[result]
        self.collect()

    def collect(self) -> None:
        """Recycle finished fences and run destroy callbacks that are now safe."""
        with self._lock:
            while self._inflight:
                serial, fence = self._inflight[0]
                status = vk.lib.vkGetFenceStatus(self.handle, fence)  # straight to the loader: hot
                if status == vk.VK_NOT_READY:
                    break
                if status != vk.VK_SUCCESS:
                    raise vk.exception_codes[status]
                self._inflight.popleft()
                self._free_fences.append(fence)
                self._completed = serial
            while self._retired and self._retired[0][0] <= self._completed:
                self._retired.popleft()[1]()

    def retire(self, callback) -> None:
        """Run ``callback`` once every submission made so far has finished."""
        with self._lock:
            self._retired.append((self._serial, callback))
            self.collect()

    @property
    def pending_releases(self) -> int:
        return len(self._retired)

    # -- lifetime -----------------------------------------------------------------
    def close(self) -> None:
        if getattr(self, "handle", None) is None:
            return
        self.wait()
        for obj in self.cache.values():
            obj.close()
        self.cache.clear()
        vk.vkDeviceWaitIdle(self.handle)
        with self._lock:
            while self._retired:
                self._retired.popleft()[1]()
            for fence in self._all_fences:  # free, in flight (finished now) or lost to an interrupt
                vk.vkDestroyFence(self.handle, fence, None)
            self._all_fences.clear()
            self._free_fences.clear()
            self._inflight.clear()
            vk.vkDestroyCommandPool(self.handle, self.command_pool, None)
            handle, self.handle = self.handle, None
            vk.vkDestroyDevice(handle, None)
        if self._own_instance:
            self.instance.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
