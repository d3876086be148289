"""Caliper: see a network's internal state in the same frame it was computed.

The Vulkan core lives in :mod:`caliper_vk.engine`; views in
:mod:`caliper_vk.views`; torch-facing exporters in :mod:`caliper_vk.exporters`;
the run recorder in :mod:`caliper_vk.record`; the dashboard in
:mod:`caliper_vk.dashboard`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

__version__ = "0.1.0"  # the one place: pyproject.toml reads it (tool.setuptools.dynamic)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names resolve lazily below
    from .api import add, attach, due, empty, session, status, step
    from .engine import Canvas
    from .exporters import ContractError
    from .live import Panel, Session
    from .record import Recorder, RunFileError, load_run, watch
    from .shader_module import ShaderCompileError, ShaderModule, ShaderSignatureError
    from .views import Heatmap, Histogram, PointCloud, Text, TextGrid, make_view
    from .views.custom import CustomPanel, check_panel

# Names resolve on first use (PEP 562): ``caliper view`` and ``import caliper_vk.record`` do not
# pay for the live session's imports, and the live API does not pay for the dashboard's.
_EXPORTS = {
    ".api": ("add", "attach", "due", "empty", "session", "status", "step"),
    ".engine": ("Canvas",),
    ".exporters": ("ContractError",),
    ".record": ("Recorder", "RunFileError", "load_run", "watch"),
    ".live": ("Panel", "Session"),
    ".shader_module": ("ShaderCompileError", "ShaderModule", "ShaderSignatureError"),
    ".views": ("Heatmap", "Histogram", "PointCloud", "Text", "TextGrid", "make_view"),
    ".views.custom": ("CustomPanel", "check_panel"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}


if not TYPE_CHECKING:  # hidden from type checkers, which then report a misspelt name
    def __getattr__(name: str):
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module 'caliper_vk' has no attribute {name!r}")
        value = getattr(import_module(module, __name__), name)
        globals()[name] = value
        return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


__all__ = ["Canvas", "ContractError", "CustomPanel", "Heatmap", "Histogram", "Panel", "PointCloud", "Recorder",
           "RunFileError", "Session", "ShaderCompileError", "ShaderModule", "ShaderSignatureError", "Text",
           "TextGrid", "__version__", "add", "attach", "check_panel", "due", "empty", "load_run", "make_view",
           "session", "status", "step", "watch"]
