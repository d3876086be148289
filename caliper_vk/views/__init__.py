"""Built-in views. Each is a drawable for a canvas panel with a numpy twin
(``reference``) that produces the same bytes as its compute shaders."""

from .confusion import Confusion
from .curve import Curve
from .custom import CustomPanel
from .heatmap import Heatmap
from .histogram import Histogram
from .images import Images
from .pointcloud import PointCloud
from .text import Text
from .textgrid import TextGrid

VIEWS = {"pointcloud": PointCloud, "heatmap": Heatmap, "histogram": Histogram, "curve": Curve,
         "confusion": Confusion, "images": Images, "text": Text,
         "textgrid": TextGrid}


class UnknownViewError(ValueError):
    """An unknown view name; the message lists the available views."""


def make_view(name: str, **options):
    """Construct the view called ``name`` (``pointcloud``, ``heatmap``, ``histogram``)."""
    try:
        cls = VIEWS[name]
    except KeyError:
        raise UnknownViewError(
            f"unknown view {name!r}; available views: {', '.join(sorted(VIEWS))}") from None
    return cls(**options)


__all__ = ["VIEWS", "Confusion", "Curve", "CustomPanel", "Heatmap", "Histogram", "Images", "PointCloud",
           "Text", "TextGrid", "UnknownViewError", "make_view"]
