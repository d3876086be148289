"""The floor: a minimal hand-written Vulkan point-cloud frame, for bench/suite.py to compare against.

Not Caliper's views or session: only the engine's lowest primitives (a device, buffers, a host
import of the tensor's pages, two compute pipelines from bench/floor.comp, one pre-recorded
command buffer). Per frame:

1. the key buffer is filled with 0 (a transfer);
2. one invocation per point projects it with a fixed camera (fitted once, at setup: the floor
   does not re-fit a moving cloud, which Caliper does every frame) and does one 32-bit
   ``atomicMax`` of (24-bit quantised depth << 8 | label) into its pixel: 1-px points;
3. one invocation per pixel maps the key to a palette colour shaded by depth, or the
   background, as a packed RGBA8 word;
4. the frame is copied into a host-cached buffer, the host waits for the fence and copies
   the 800 x 600 RGBA frame into a numpy array (what ``Session.render()`` returns too).

The positions are read in place from the torch tensor's own pages (``VK_EXT_external_memory_host``,
as Caliper's zero-copy path does); where the driver refuses the import they are copied into a
mapped buffer each frame instead, and the result says so. Nothing here is exact or
order-independent across quantisation ties (two points within 2^-24 of the depth range in one
pixel resolve by label): it is a floor for speed, not a renderer.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TAB10 = ("1f77b4", "ff7f0e", "2ca02c", "d62728", "9467bd", "8c564b", "e377c2", "7f7f7f", "bcbd22", "17becf")
BACKGROUND = 0xFF1A1616  # RGBA (22, 22, 26, 255), packed r | g << 8 | b << 16 | a << 24
GROUP = 256  # local_size_x in floor.comp


def _rgba(hex6: str) -> int:
    r, g, b = (int(hex6[k:k + 2], 16) for k in (0, 2, 4))
    return r | (g << 8) | (b << 16) | (255 << 24)


def camera(points: np.ndarray, width: int, height: int, yaw_deg: float = 30.0,
           pitch_deg: float = 20.0) -> np.ndarray:
    """The uniform block of floor.comp for a camera that fits ``points`` (once, at setup)."""
    finite = points[np.isfinite(points).all(axis=1)]
    lo, hi = finite.min(axis=0).astype(np.float64), finite.max(axis=0).astype(np.float64)
    center = (lo + hi) / 2
    radius = float(np.sqrt(((finite - center) ** 2).sum(axis=1).max())) * 1.001 or 1.0
    y, p = math.radians(yaw_deg), math.radians(pitch_deg)
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rx = np.array([[1, 0, 0], [0, math.cos(p), -math.sin(p)], [0, math.sin(p), math.cos(p)]])
    rot = rx @ ry
    block = np.zeros(36, np.uint32)  # 9 vec4s: r0 r1 r2 center screen size palette[3]
    f = block.view(np.float32)
    for row in range(3):
        f[4 * row:4 * row + 3] = rot[row]
    f[12:15] = center
    f[15] = 0.45 * min(width, height) / radius
    depth_scale = 16777214.0 / (2 * radius)  # qz in [-radius, radius] -> [1, 2^24 - 1]
    f[16:20] = (width / 2, height / 2, depth_scale, radius * depth_scale + 1.0)
    block[21], block[22] = width, height
    block[24:34] = [_rgba(c) for c in TAB10]
    block[34] = BACKGROUND
    return block


class Floor:
    """The floor's device objects for one ``(N, 3)`` float32 CPU tensor. States: open → closed."""

    def __init__(self, tensor, labels: np.ndarray, width: int = 800, height: int = 600,
                 profile: bool = False):
        from caliper_vk.engine import Buffer, ComputePipeline, Device, Instance, Recorder
        from caliper_vk.engine.external import HostImportError, import_host_pointer
        from caliper_vk.engine.shaders import compile_glsl

        import torch

        if tensor.dtype != torch.float32 or tensor.dim() != 2 or tensor.shape[1] != 3:
            raise ValueError(f"the floor takes an (N, 3) float32 tensor, got {tuple(tensor.shape)} "
                             f"{tensor.dtype}")
        if not tensor.is_contiguous():
            raise ValueError("the floor reads the tensor's pages in place: pass a contiguous tensor")
        self.tensor, self.width, self.height = tensor, width, height
        n = tensor.shape[0]
        self.instance = Instance(validation=False)
        self.device = dev = Device(self.instance)
        source = (HERE / "floor.comp").read_text()
        self.splat = ComputePipeline(dev, compile_glsl(source, "floor_splat.comp", {"SPLAT": 1}),
                                     ["uniform", "buffer", "buffer", "buffer"], "floor splat")
        self.resolve = ComputePipeline(dev, compile_glsl(source, "floor_resolve.comp", {"SPLAT": 0}),
                                       ["uniform", "buffer", "buffer"], "floor resolve")
        params = camera(tensor.numpy(), width, height)
        try:
            self.positions = import_host_pointer(dev, tensor.data_ptr(), n * 12, keepalive=tensor)
            self.path, offset, self._staging = "zero-copy", self.positions.offset, None
        except HostImportError as exc:
            self.positions = Buffer(dev, n * 12)
            self.path, offset = f"staging ({exc})", 0
            self._staging = self.positions.view(np.float32, n * 3).reshape(n, 3)
        params[23] = offset // 4
        params[20] = n
        self.params = Buffer(dev, params.nbytes)
        self.params.write(params)
        self.labels = Buffer(dev, max(4, n * 4))
        self.labels.write((np.asarray(labels) % len(TAB10)).astype(np.uint32))  # palette entries
        self.keys = Buffer(dev, width * height * 4, host_visible=False)
        self.frame = Buffer(dev, width * height * 4, host_visible=False)
        self.readback = Buffer(dev, width * height * 4, readback=True)
        self.sets = [self.splat.bind([self.params, self.positions, self.labels, self.keys]),
                     self.resolve.bind([self.params, self.keys, self.frame])]
        rec = self.recorder = Recorder(dev)
        self.profiler = None
        if profile:  # GPU timestamps after each pass (see timings())
            from caliper_vk.engine.timing import Profiler

            self.profiler = rec.profiler = Profiler(dev)
        rec.begin()
        if self.profiler is not None:
            self.profiler.begin(rec)
        rec.fill(self.keys, 0)
        rec.barrier()
        rec.mark("clear")
        rec.dispatch(self.sets[0], -(-n // GROUP))
        rec.barrier()
        rec.mark("splat")
        rec.dispatch(self.sets[1], -(-(width * height) // GROUP))
        rec.barrier()
        rec.mark("resolve")
        rec.copy_buffer(self.frame, self.readback, width * height * 4)
        rec.host_barrier()
        rec.mark("readback")
        rec.end()

    def render(self) -> np.ndarray:
        """One frame of the tensor's current values, as a (height, width, 4) uint8 array."""
        if self._staging is not None:
            np.copyto(self._staging, self.tensor.numpy())
        self.device.wait(self.device.submit([self.recorder.handle]))
        return self.readback.view(np.uint8, self.width * self.height * 4).reshape(
            self.height, self.width, 4).copy()

    def timings(self) -> dict:
        """GPU milliseconds per pass of the last frame (made with ``profile=True``)."""
        return dict(self.profiler.read()) if self.profiler is not None else {}

    def close(self) -> None:
        self.device.wait()
        if self.profiler is not None:
            self.profiler.close()
        self.recorder.close()
        for s in self.sets:
            s.close()
        for b in (self.params, self.labels, self.keys, self.frame, self.readback, self.positions):
            b.close()
        self.splat.close()
        self.resolve.close()
        self.device.close()
        self.instance.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
