"""caliper_vk.engine — the Vulkan core.

Device, memory, images, sync, shaders, compute passes and the canvas. It knows
nothing of torch, views or runs (a test guards that); it is shipped inside the
package as ``caliper_vk.engine`` and is never importable as a bare ``engine``.
"""

from ._vk import VulkanError
from .canvas import Canvas, Panel, Rect, default_device, grid_rects
from .commands import Recorder
from .compute import ComputePipeline, DescriptorSet
from .device import Device
from .image import StorageImage
from .instance import Instance, NoDeviceError, PhysicalDeviceInfo
from .memory import Buffer
from .shaders import ShaderCompileError
from .sync import TimelineSemaphore

__all__ = [
    "Buffer",
    "Canvas",
    "ComputePipeline",
    "DescriptorSet",
    "Device",
    "Instance",
    "NoDeviceError",
    "Panel",
    "PhysicalDeviceInfo",
    "Recorder",
    "Rect",
    "ShaderCompileError",
    "StorageImage",
    "TimelineSemaphore",
    "VulkanError",
    "default_device",
    "grid_rects",
]
