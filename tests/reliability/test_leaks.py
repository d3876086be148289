"""Leaks: attach/close cycles and long runs leave device memory, file descriptors,
Vulkan allocations and Python objects flat.

Bounds: memory and allocation counts must return exactly to their value after
warm-up (the engine accounts every vkAllocateMemory/vkFreeMemory), file
descriptors exactly, and Python objects within 2,000 — gc.get_objects() moves by
a few hundred between identical states (interned caches, hypothesis, pytest).
"""

import gc
import os

import numpy as np
import torch

import caliper_vk as cv


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def snapshot(session):
    session.flush()
    session.device.wait()
    session.device.collect()
    gc.collect()
    return dict(session.device.memory_stats), fds(), len(gc.get_objects())


def test_attach_close_cycles_leak_nothing():
    with cv.Session(window=False, size=(64, 48)) as s:
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
        for _ in range(1000):
            p = s.attach(t, "pointcloud", labels=np.arange(500) % 10)
            q = s.attach(h, "heatmap")
            s.step()
            p.close()
            q.close()
        mem1, fd1, obj1 = snapshot(s)
    assert mem1 == mem0
    assert fd1 == fd0
    assert abs(obj1 - obj0) < 2000


def test_ten_thousand_frames_stay_flat():
    with cv.Session(window=False, size=(64, 48)) as s:
        t = cv.empty((200, 3))
        panel = s.attach(t, "pointcloud")
        for _ in range(50):
            s.render()
        mem0, fd0, obj0 = snapshot(s)
        drawn = 0
        while drawn < 10_000:
            with panel.writing():
                t.normal_()
            drawn += s.step()
        mem1, fd1, obj1 = snapshot(s)
    assert mem1 == mem0
    assert fd1 == fd0
    assert abs(obj1 - obj0) < 2000
