"""Leaks: attach/close cycles and long runs leave device memory, Vulkan objects, file descriptors
and Python objects flat.

Bounds: memory and allocation counts must return exactly to their value after warm-up (the
engine accounts every vkAllocateMemory/vkFreeMemory); live Vulkan objects of every type exactly
(counted by wrapping the ``vulkan`` module's create/allocate and destroy/free calls, which is how
the engine reaches them); file descriptors exactly; and Python objects within 2,000 —
gc.get_objects() moves by a few hundred between identical states (interned caches, hypothesis,
pytest). The cycle test runs on a private device and closes it at the end: the validation
layer's object tracker then reports any object never destroyed as an error, which fails the test.
"""

import gc
import os
from collections import Counter

import numpy as np
import torch

import caliper_vk as cv

# the create/allocate and destroy/free entry points the engine uses, by object type
KINDS = {
    "buffer": ("vkCreateBuffer", "vkDestroyBuffer"), "memory": ("vkAllocateMemory", "vkFreeMemory"),
    "image": ("vkCreateImage", "vkDestroyImage"), "image view": ("vkCreateImageView", "vkDestroyImageView"),
    "semaphore": ("vkCreateSemaphore", "vkDestroySemaphore"), "fence": ("vkCreateFence", "vkDestroyFence"),
    "descriptor pool": ("vkCreateDescriptorPool", "vkDestroyDescriptorPool"),
    "descriptor set layout": ("vkCreateDescriptorSetLayout", "vkDestroyDescriptorSetLayout"),
    "pipeline layout": ("vkCreatePipelineLayout", "vkDestroyPipelineLayout"),
    "pipeline": ("vkCreateComputePipelines", "vkDestroyPipeline"),
    "shader module": ("vkCreateShaderModule", "vkDestroyShaderModule"),
    "command buffer": ("vkAllocateCommandBuffers", "vkFreeCommandBuffers"),
    "query pool": ("vkCreateQueryPool", "vkDestroyQueryPool"),
    "sampler": ("vkCreateSampler", "vkDestroySampler"),
    "render pass": ("vkCreateRenderPass", "vkDestroyRenderPass"),
    "framebuffer": ("vkCreateFramebuffer", "vkDestroyFramebuffer"),
}
CREATE = {create: kind for kind, (create, _) in KINDS.items()} | {"vkCreateGraphicsPipelines": "pipeline"}
DESTROY = {destroy: kind for kind, (_, destroy) in KINDS.items()}


class VulkanObjects:
    """Vulkan objects created and destroyed while installed (``net``: live now minus live then)."""

    def __init__(self, monkeypatch):
        import vulkan as vk

        self.created, self.destroyed = Counter(), Counter()
        for name, kind in CREATE.items():
            monkeypatch.setattr(vk, name, self._wrap(getattr(vk, name), kind, self.created, create=True))
        for name, kind in DESTROY.items():
            monkeypatch.setattr(vk, name, self._wrap(getattr(vk, name), kind, self.destroyed, create=False))

    @staticmethod
    def _wrap(fn, kind, counter, create):
        def counted(*args):
            out = fn(*args)
            if create:
                counter[kind] += len(out) if isinstance(out, list) else 1
            else:
                counter[kind] += args[2] if kind == "command buffer" else 1
            return out
        return counted

    @property
    def net(self) -> dict:
        return {k: self.created[k] - self.destroyed[k] for k in self.created | self.destroyed
                if self.created[k] != self.destroyed[k]}


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def snapshot(session):
    session.flush()
    session.device.wait()
    session.device.collect()
    gc.collect()
    return dict(session.device.memory_stats), fds(), len(gc.get_objects())


def test_attach_close_cycles_leak_nothing(monkeypatch):
    from caliper_vk.engine import Device

    device = Device()  # private: closed at the end, when the validation layer lists survivors
    try:
        # no history: its ring grows by design until its budget (tests/test_rewind.py checks it stops there)
        with cv.Session(window=False, size=(64, 48), device=device, history=None) as s:
            t = cv.empty((500, 3))
            t.copy_(torch.randn(500, 3))
            h = torch.randn(16, 16)
            for _ in range(20):  # warm-up: pipelines, caches
                p = s.attach(t, "pointcloud", labels=np.arange(500) % 10)
                q = s.attach(h, "heatmap")
                s.render()
                p.close()
                q.close()
            mem0, fd0, obj0 = snapshot(s)
            vk_objects = VulkanObjects(monkeypatch)
            for _ in range(1000):
                p = s.attach(t, "pointcloud", labels=np.arange(500) % 10)
                q = s.attach(h, "heatmap")
                s.step()
                p.close()
                q.close()
            mem1, fd1, obj1 = snapshot(s)
            monkeypatch.undo()
    finally:
        device.close()
    print(f"\n1,000 attach/close cycles: memory {mem0} -> {mem1}; fds {fd0} -> {fd1}; "
          f"Python objects {obj0} -> {obj1}; Vulkan objects created {dict(vk_objects.created)}, "
          f"net {vk_objects.net or 0}")
    assert mem1 == mem0
    assert vk_objects.net == {} and sum(vk_objects.created.values()) > 10_000
    assert fd1 == fd0
    assert abs(obj1 - obj0) < 2000


def test_ten_thousand_frames_stay_flat(monkeypatch):
    # every frame it can; no history (the ring grows to its budget)
    with cv.Session(window=False, size=(64, 48), budget=None, history=None) as s:
        t = cv.empty((200, 3))
        panel = s.attach(t, "pointcloud")
        for _ in range(50):
            s.render()
        mem0, fd0, obj0 = snapshot(s)
        vk_objects = VulkanObjects(monkeypatch)
        drawn = 0
        while drawn < 10_000:
            with panel.writing():
                t.normal_()
            drawn += s.step()
        mem1, fd1, obj1 = snapshot(s)
        monkeypatch.undo()
    print(f"\n10,000 frames: memory {mem0} -> {mem1}; fds {fd0} -> {fd1}; Python objects {obj0} -> {obj1}; "
          f"Vulkan objects created {dict(vk_objects.created)}, net {vk_objects.net or 0}")
    assert mem1 == mem0
    assert vk_objects.net == {}
    assert fd1 == fd0
    assert abs(obj1 - obj0) < 2000
