"""Built-in views. Each is a drawable for a canvas panel with a numpy twin
(``reference``) that produces the same bytes as its compute shaders, and registers
itself (``@register_view`` in its module: :mod:`._registry`) with its passes, its
parameter block, its inputs and its tests. :data:`VIEWS` is the registry's.

Every public module of this package (a name without a leading underscore) is imported here, so a
new view's module registers itself by being in the folder; the classes below are imported by name
only to be importable from ``caliper_vk.views``."""

import importlib
import pkgutil

from ._registry import SPECS, VIEWS, Sample, ViewSpec, profile_tests, register_view
from .pointcloud import PointCloud
from .heatmap import Heatmap
from .histogram import Histogram
from .curve import Curve
from .textgrid import TextGrid
from .confusion import Confusion
from .images import Images
from .text import Text
from .custom import CustomPanel

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f".{_module.name}", __name__)
del _module


class UnknownViewError(ValueError):
    """An unknown view name; the message lists the available views."""


def view_options(cls) -> list[str]:
    """The keyword options a view class takes (its constructor's named parameters)."""
    import inspect

    params = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in params if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def make_view(name: str, **options):
    """Construct the view called ``name`` (``pointcloud``, ``heatmap``, ``histogram`` ...).

    An option the view does not take is a TypeError that names it, the nearest valid option
    (``colourmap`` → ``colormap``) and the full list."""
    import difflib

    try:
        cls = VIEWS[name]
    except KeyError:
        raise UnknownViewError(
            f"unknown view {name!r}; available views: {', '.join(sorted(VIEWS))}") from None
    valid = view_options(cls)
    unknown = [k for k in options if k not in valid]
    if unknown:
        hints = []
        for k in unknown:
            near = difflib.get_close_matches(k, valid, n=1, cutoff=0.6)
            hints.append(f"{k!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
        raise TypeError(f"the {name} view has no option {', '.join(hints)}; its options: {', '.join(valid)}")
    return cls(**options)


__all__ = ["SPECS", "VIEWS", "Confusion", "Curve", "CustomPanel", "Heatmap", "Histogram", "Images",
           "PointCloud", "Sample", "Text", "TextGrid", "UnknownViewError", "ViewSpec", "make_view",
           "profile_tests", "register_view", "view_options"]
