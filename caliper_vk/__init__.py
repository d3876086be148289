"""Caliper: see a network's internal state in the same frame it was computed.

The Vulkan core lives in :mod:`caliper_vk.engine`; views in
:mod:`caliper_vk.views`; torch-facing exporters in :mod:`caliper_vk.exporters`;
the run recorder in :mod:`caliper_vk.record`; the dashboard in
:mod:`caliper_vk.dashboard`.
"""

from .api import add, attach, due, empty, session, status, step
from .engine import Canvas
from .exporters import ContractError
from .record import Recorder, RunFileError, load_run, watch
from .live import Panel, Session
from .shader_module import ShaderCompileError, ShaderModule, ShaderSignatureError
from .views import Heatmap, Histogram, PointCloud, Text, TextGrid, make_view
from .views.custom import CustomPanel, check_panel

__version__ = "0.1.0"
__all__ = ["Canvas", "ContractError", "CustomPanel", "Heatmap", "Histogram", "Panel", "PointCloud", "Recorder",
           "RunFileError", "Session", "ShaderCompileError", "ShaderModule", "ShaderSignatureError", "Text",
           "TextGrid", "__version__", "add", "attach", "check_panel", "due", "empty", "load_run", "make_view",
           "session", "status", "step", "watch"]
