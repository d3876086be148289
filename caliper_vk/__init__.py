"""Caliper: see a network's internal state in the same frame it was computed.

The Vulkan core lives in :mod:`caliper_vk.engine`; views (point cloud,
heatmap) in :mod:`caliper_vk.views`; torch-facing exporters in
:mod:`caliper_vk.exporters`.
"""

from .engine import Canvas
from .views import Heatmap, PointCloud, make_view

__version__ = "0.1.0"
__all__ = ["Canvas", "Heatmap", "PointCloud", "__version__", "make_view"]
