"""The one place that touches the ``vulkan`` cffi module directly.

Why this file exists
--------------------
The ``vulkan`` package builds structs for us, but its constructors allocate
nested arrays and sub-structs that may be garbage-collected while the parent
still points at them (an open upstream bug). Every struct the engine passes to
Vulkan is therefore built by :func:`new`, which allocates with cffi directly
and keeps every child alive exactly as long as the parent, in a
``WeakKeyDictionary`` keyed on the parent (the pattern wgpu-py uses).

Known quirks of the package handled here: every non-success ``VkResult``
raises (``VK_TIMEOUT`` and ``VK_NOT_READY`` included), ``VK_WHOLE_SIZE`` is
``-1`` in its namespace, extension functions must be looked up through
``vkGetInstanceProcAddr``/``vkGetDeviceProcAddr``, and output structs must be
passed with their ``sType`` set (its auto-created ones have ``sType=0``).
"""

from __future__ import annotations

import itertools
import re
import weakref
from functools import lru_cache

from .loader import import_vulkan

vk = import_vulkan()  # the loader found by the engine (macOS: Homebrew, VULKAN_SDK) before vulkan loads

ffi = vk.ffi
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
UINT64_MAX = 0xFFFFFFFFFFFFFFFF

_children: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class VulkanError(RuntimeError):
    """A Vulkan call failed; the message names the call and the result."""


def api_version(major: int, minor: int, patch: int = 0) -> int:
    return (major << 22) | (minor << 12) | patch


def version_str(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


@lru_cache(maxsize=None)
def _stype_for(ctype: str) -> int | None:
    """Derive ``VK_STRUCTURE_TYPE_*`` from a struct name (``VkFooBarEXT``)."""
    body = ctype[2:]
    suffix = ""
    for tag in ("EXT", "KHR", "NV", "AMD", "MVK", "INTEL"):
        if body.endswith(tag):
            body, suffix = body[: -len(tag)], "_" + tag
            break
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", body).upper()
    candidates = [words, re.sub(r"(?<=[A-Z])(?=[0-9])", "_", words)]
    candidates.append(re.sub(r"(?<=[0-9])(?=[0-9])", "_", candidates[1]))
    for c in candidates:
        value = getattr(vk, f"VK_STRUCTURE_TYPE_{c}{suffix}", None)
        if value is not None:
            return value
    return None


def _keep(parent, child) -> None:
    _children.setdefault(parent, []).append(child)


def _array(item_type, values, parent):
    """A C array of ``item_type`` holding ``values`` (strings, handles, structs, numbers)."""
    cname = item_type.cname
    values = list(values)
    if cname in ("char *", "const char *"):
        strings = [ffi.new("char[]", v.encode() if isinstance(v, str) else v) for v in values]
        _keep(parent, strings)
        arr = ffi.new("char *[]", strings)
    elif item_type.kind == "struct":
        arr = ffi.new(f"{cname}[]", len(values))
        for i, v in enumerate(values):
            arr[i] = v[0]
            _keep(parent, v)
    else:
        arr = ffi.new(f"{cname}[]", values)
    _keep(parent, arr)
    return arr


def new(ctype: str, **fields):
    """Allocate ``ctype`` with cffi, fill ``fields``, keep children alive.

    ``sType`` is filled from the struct name when it has one. Field values may
    be Python numbers, strings, lists (become C arrays), other structs made by
    :func:`new` (assigned by pointer or copied inline, as the field demands)
    or cffi handles. The returned pointer owns everything it points at.
    """
    obj = ffi.new(ctype + " *")
    struct_type = ffi.typeof(obj[0])
    field_types = dict(struct_type.fields)
    if "sType" in field_types and "sType" not in fields:
        stype = _stype_for(ctype)
        if stype is None:
            raise ValueError(f"cannot derive sType for {ctype}; pass sType=")
        obj.sType = stype
    for name, value in fields.items():
        if name not in field_types:
            raise AttributeError(f"{ctype} has no field {name!r}")
        ftype = field_types[name].type
        if value is None:
            continue
        if isinstance(value, str):
            value = ffi.new("char[]", value.encode())
            _keep(obj, value)
        elif isinstance(value, (list, tuple)) and ftype.kind == "array":
            for i, v in enumerate(value):
                getattr(obj, name)[i] = v
            continue
        elif isinstance(value, (list, tuple)):
            value = _array(ftype.item, value, obj)
        elif isinstance(value, ffi.CData) and ftype.kind == "struct":
            value = value[0]
        elif isinstance(value, ffi.CData):
            _keep(obj, value)
        setattr(obj, name, value)
    return obj


def chain(*structs):
    """Link structs through ``pNext`` in the given order; return the first."""
    for a, b in itertools.pairwise(structs):
        a.pNext = b
        _keep(a, b)
    return structs[0]


def instance_proc(instance, name: str):
    try:
        return vk.vkGetInstanceProcAddr(instance, name)
    except Exception as exc:  # the package raises ProcedureNotFoundError
        raise VulkanError(f"{name} is not available on this Vulkan instance") from exc


def device_proc(device, name: str):
    try:
        return vk.vkGetDeviceProcAddr(device, name)
    except Exception as exc:
        raise VulkanError(f"{name} is not available on this Vulkan device") from exc


def cstr(chars) -> str:
    """A fixed-size ``char[]`` field as a Python string."""
    return ffi.string(chars).decode(errors="replace")
