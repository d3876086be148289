"""Caliper: see a network's internal state in the same frame it was computed.

The Vulkan core lives in :mod:`caliper_vk.engine`; views (point cloud,
heatmap) in :mod:`caliper_vk.views`; torch-facing exporters in
:mod:`caliper_vk.exporters`.
"""

from .api import add, attach, empty, session, status, step
from .engine import Canvas
from .exporters import ContractError
from .session import Panel, Session
from .views import Heatmap, Histogram, PointCloud, Text, make_view

__version__ = "0.1.0"
__all__ = ["Canvas", "ContractError", "Heatmap", "Histogram", "Panel", "PointCloud", "Session", "Text",
           "__version__", "add", "attach", "empty", "make_view", "session", "status", "step"]
