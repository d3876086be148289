"""caliper_vk.engine — the Vulkan core.

Device, memory, images, sync, shaders, compute passes, the canvas, and the
overlay renderer (textured triangle lists for Dear ImGui / ImPlot). It knows
nothing of torch, views or runs (a test guards that); it is shipped inside the
package as ``caliper_vk.engine`` and is never importable as a bare ``engine``.
"""

from ._vk import VulkanError
from .canvas import Canvas, Panel, Rect, default_device, grid_rects
from .commands import Recorder
from .compute import ComputePipeline, DescriptorSet
from .device import Device
from .image import StorageImage
from .instance import Instance, NoDeviceError, PhysicalDeviceInfo, cpu_raster_threads
from .memory import Buffer
from .overlay import VERTEX_DTYPE, DrawCommand, DrawList, Overlay
from .shaders import ShaderCompileError
from .sync import TimelineSemaphore
from .texture import Texture

__all__ = [
    "VERTEX_DTYPE",
    "Buffer",
    "Canvas",
    "ComputePipeline",
    "DescriptorSet",
    "Device",
    "DrawCommand",
    "DrawList",
    "Instance",
    "NoDeviceError",
    "Overlay",
    "Panel",
    "PhysicalDeviceInfo",
    "Recorder",
    "Rect",
    "ShaderCompileError",
    "StorageImage",
    "Texture",
    "TimelineSemaphore",
    "VulkanError",
    "cpu_raster_threads",
    "default_device",
    "grid_rects",
]
