"""What the device under test (and its profile, ``CALIPER_VK_PROFILE``) gives a CPU tensor.

The live-attach tests run under every device profile (tools/test): where the profile hides
``VK_EXT_external_memory_host`` (``apple-nohost``, ``minimal``) a CPU tensor takes host
staging, and the tests expect exactly that instead of the in-place import.
"""

from __future__ import annotations


def host_import() -> bool:
    """True when this device (as its profile reports it) imports host memory."""
    from caliper_vk.engine import default_device

    return default_device().info.has("VK_EXT_external_memory_host")


def cpu_path() -> str:
    """The panel path of an ordinary CPU tensor: zero-copy with host import, else host staging."""
    return "zero-copy" if host_import() else "host staging"
