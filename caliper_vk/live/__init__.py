"""The live side of Caliper: attached tensors drawn every training step.

``session`` (the frame loop), ``attach`` (tensor → live input → view → panel),
``panels`` (:class:`Panel`, :class:`HostPanel`), ``protocol`` (the write/read
protocol of one attached tensor), ``pacing`` (``max_fps``, ``due``, saved frames),
``budget`` (Caliper's share of the training loop's time, kept by drawing fewer frames),
``layout`` (the panel grid), ``input`` (mouse and keys), ``status`` (the status
line and title bars), ``history`` (the rewind ring of recent frames' inputs),
``memory`` (the device memory Caliper holds and ``device_memory=``'s cap),
``distributed`` with ``ranklinks`` (a torch.distributed job's probes gathered to one
rendering rank) and ``sinks`` (a browser, a notebook widget, a video). The data path
reads tensor → :mod:`caliper_vk.exporters`
→ live input → :mod:`caliper_vk.views` → canvas → window.
"""

from .memory import DeviceMemoryError
from .panels import HostPanel, Panel
from .session import Session, display_available
from .status import Status, title_items

__all__ = ["DeviceMemoryError", "HostPanel", "Panel", "Session", "Status", "display_available", "title_items"]
