"""The device features and limits the engine checks before Vulkan sees a pipeline.

The validation layer checks shaders against the features *enabled* at
``vkCreateDevice`` and against the device's *real* limits. A device profile
(:mod:`.profiles`) lowers limits the layer cannot know about, and a device
without a feature should get a sentence naming it rather than a validation
error or a driver crash. So every pipeline is checked here first, from its
SPIR-V (capabilities, workgroup size) and its bindings, and every dispatch and
descriptor range against the (profile-adjusted) :class:`PhysicalDeviceInfo`.
"""

from __future__ import annotations

import numpy as np

SPIRV_MAGIC = 0x07230203
_OP_CAPABILITY, _OP_EXECUTION_MODE = 17, 16
_MODE_LOCAL_SIZE = 17
# SPIR-V RoundingModeRTE: the capability and the execution mode (operand: the float width)
CAP_ROUNDING_MODE_RTE, MODE_ROUNDING_MODE_RTE = 4467, 4462
RTE_FEATURE = "shaderRoundingModeRTEFloat32"
# SPIR-V capability -> (the Vulkan feature that allows it, what it is)
CAPABILITY_FEATURES = {
    11: ("shaderInt64", "64-bit integers"),
    12: ("shaderBufferInt64Atomics", "64-bit buffer atomics"),
}
# binding kind (compute.py) -> the per-stage limit on its descriptors
BINDING_LIMITS = {
    "buffer": "maxPerStageDescriptorStorageBuffers",
    "uniform": "maxPerStageDescriptorUniformBuffers",
    "image": "maxPerStageDescriptorStorageImages",
}


class DeviceLimitError(RuntimeError):
    """Work this device (or device profile) cannot run; the message names the feature or
    limit, the value needed and the value allowed."""


def spirv_requirements(spirv: bytes) -> tuple[set, tuple | None]:
    """The capabilities a SPIR-V module declares and its ``LocalSize`` (None when absent)."""
    words = np.frombuffer(bytes(spirv), dtype=np.uint32)
    if len(words) < 5 or words[0] != SPIRV_MAGIC:
        raise ValueError("not a SPIR-V module (bad magic number)")
    caps, local, i = set(), None, 5
    while i < len(words):
        op, count = int(words[i]) & 0xFFFF, int(words[i]) >> 16
        if count == 0:
            raise ValueError(f"malformed SPIR-V: zero-length instruction at word {i}")
        if op == _OP_CAPABILITY:
            caps.add(int(words[i + 1]))
        elif op == _OP_EXECUTION_MODE and int(words[i + 2]) == _MODE_LOCAL_SIZE:
            local = tuple(int(w) for w in words[i + 3:i + 6])
        i += count
    return caps, local


def fit_rounding_mode(info, spirv: bytes) -> bytes:
    """``spirv`` as this device can take it: the built-in shaders declare round-to-nearest-even
    for 32-bit floats (``RoundingModeRTE``, engine/shaders/common.glsl); a device whose
    ``shaderRoundingModeRTEFloat32`` is false would reject the module, so the capability and
    the execution mode are removed and the driver rounds its own way (docs/determinism.md).
    Unchanged when the device takes the mode or the module does not declare it."""
    if info.features.get(RTE_FEATURE, False):
        return spirv
    words = np.frombuffer(bytes(spirv), dtype=np.uint32)
    if len(words) < 5 or words[0] != SPIRV_MAGIC:
        raise ValueError("not a SPIR-V module (bad magic number)")
    keep, i, dropped = [words[:5]], 5, False
    while i < len(words):
        op, count = int(words[i]) & 0xFFFF, int(words[i]) >> 16
        if count == 0:
            raise ValueError(f"malformed SPIR-V: zero-length instruction at word {i}")
        rte = ((op == _OP_CAPABILITY and int(words[i + 1]) == CAP_ROUNDING_MODE_RTE)
               or (op == _OP_EXECUTION_MODE and int(words[i + 2]) == MODE_ROUNDING_MODE_RTE))
        if rte:
            dropped = True
        else:
            keep.append(words[i:i + count])
        i += count
    return np.concatenate(keep).tobytes() if dropped else spirv


def _who(info) -> str:
    return info.name + ("" if info.profile else " (this device)")


def check_pipeline(info, spirv: bytes, bindings, name: str) -> None:
    """Raise :class:`DeviceLimitError` unless ``info``'s device can run this compute shader."""
    caps, local = spirv_requirements(spirv)
    for cap, (feature, what) in CAPABILITY_FEATURES.items():
        if cap in caps and not info.features.get(feature, False):
            raise DeviceLimitError(
                f"the {name} shader needs {feature} ({what}), which {_who(info)} lacks; "
                "run it on a device that has the feature (`caliper doctor` lists this one's)")
    limits = info.limits
    if local is not None:
        size, most = limits["maxComputeWorkGroupSize"], limits["maxComputeWorkGroupInvocations"]
        count = local[0] * local[1] * local[2]
        if count > most or any(a > b for a, b in zip(local, size, strict=True)):
            raise DeviceLimitError(
                f"the {name} shader's workgroup is {local[0]}x{local[1]}x{local[2]} ({count} invocations); "
                f"{_who(info)} allows {most} invocations and at most "
                f"{size[0]}x{size[1]}x{size[2]} (maxComputeWorkGroupInvocations, maxComputeWorkGroupSize)")
    kinds = list(bindings)
    for kind, limit in BINDING_LIMITS.items():
        n = kinds.count(kind)
        if n > limits[limit]:
            raise DeviceLimitError(f"the {name} shader binds {n} {kind} descriptors; {_who(info)} "
                                   f"allows {limits[limit]} per stage ({limit})")
    if len(kinds) > limits["maxPerStageResources"]:
        raise DeviceLimitError(f"the {name} shader binds {len(kinds)} resources; {_who(info)} allows "
                               f"{limits['maxPerStageResources']} per stage (maxPerStageResources)")


def check_dispatch(info, name: str, x: int, y: int, z: int) -> None:
    """Raise unless ``x * y * z`` workgroups fit ``maxComputeWorkGroupCount``."""
    most = info.limits["maxComputeWorkGroupCount"]
    if x > most[0] or y > most[1] or z > most[2]:
        raise DeviceLimitError(f"{name}: a dispatch of {x}x{y}x{z} workgroups exceeds {_who(info)}'s "
                               f"maxComputeWorkGroupCount {most[0]}x{most[1]}x{most[2]}")


def check_range(info, kind: str, nbytes: int, name: str) -> None:
    """Raise unless a ``kind`` (``buffer``/``uniform``) descriptor may span ``nbytes``."""
    limit = "maxUniformBufferRange" if kind == "uniform" else "maxStorageBufferRange"
    if nbytes > info.limits[limit]:
        raise DeviceLimitError(f"{name}: a {nbytes:,}-byte {kind} buffer exceeds {_who(info)}'s "
                               f"{limit} of {info.limits[limit]:,} bytes")


def check_image(info, width: int, height: int) -> None:
    """Raise unless a 2-D image of ``width`` x ``height`` fits ``maxImageDimension2D``."""
    most = info.limits["maxImageDimension2D"]
    if width > most or height > most:
        raise DeviceLimitError(f"a {width}x{height} image exceeds {_who(info)}'s maxImageDimension2D "
                               f"of {most}: use a smaller canvas or window")


def check_graphics(info, name: str, push_constant_bytes: int, vertex_stride: int) -> None:
    """Raise unless a graphics pipeline's push constants and vertex stride fit the device
    (``VK_KHR_portability_subset``'s ``minVertexInputBindingStrideAlignment`` included)."""
    if push_constant_bytes > info.limits["maxPushConstantsSize"]:
        raise DeviceLimitError(f"{name}: {push_constant_bytes} bytes of push constants exceed "
                               f"{_who(info)}'s maxPushConstantsSize {info.limits['maxPushConstantsSize']}")
    align = (info.portability or {}).get("minVertexInputBindingStrideAlignment", 1)
    if vertex_stride % align:
        raise DeviceLimitError(f"{name}: a vertex stride of {vertex_stride} bytes is not a multiple of "
                               f"{align}, which {_who(info)} requires (VK_KHR_portability_subset "
                               "minVertexInputBindingStrideAlignment)")
