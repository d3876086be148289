"""Device profiles: run the engine as if on a device class that has less than this one.

``CALIPER_VK_PROFILE=<name>`` (or ``Instance(profile=...)``) rewrites every
:class:`~.instance.PhysicalDeviceInfo` the instance reports before anyone sees it:
features the class lacks are off (so :class:`~.device.Device` does not enable them at
``vkCreateDevice``, and the validation layer flags any shader that still uses them),
extensions it lacks are gone from :attr:`PhysicalDeviceInfo.extensions` (so they are
not enabled and every transfer path falls back), and limits are lowered to the class's
figures (never raised: a profile cannot give lavapipe what it lacks). The engine checks
the limits the validation layer cannot know about itself (:mod:`.limits`).

Why: the fallbacks (host staging, fences, no 64-bit atomics, 16 KiB host pages) would
otherwise run only on machines CI does not have. docs/profiles.md gives each profile's
figures with the MoltenVK source lines they come from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

PROFILE_ENV = "CALIPER_VK_PROFILE"

# The limits a profile may tighten, as PhysicalDeviceInfo.limits spells them (Vulkan's names).
LIMIT_NAMES = (
    "maxStorageBufferRange", "maxUniformBufferRange", "maxPushConstantsSize",
    "maxComputeWorkGroupCount", "maxComputeWorkGroupInvocations", "maxComputeWorkGroupSize",
    "maxComputeSharedMemorySize", "maxBoundDescriptorSets", "maxPerStageDescriptorStorageBuffers",
    "maxPerStageDescriptorUniformBuffers", "maxPerStageDescriptorStorageImages",
    "maxPerStageDescriptorSampledImages", "maxPerStageDescriptorSamplers", "maxPerStageResources",
    "maxImageDimension2D",
)

# External memory and semaphore handles MoltenVK does not have (its MVKExtensions.def lists
# none of them), and the 64-bit atomics extension it marks unavailable on every platform.
_NOT_IN_MOLTENVK = frozenset({
    "VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd", "VK_KHR_external_memory_win32",
    "VK_KHR_external_semaphore_win32", "VK_EXT_external_memory_dma_buf", "VK_KHR_shader_atomic_int64",
})

# MoltenVK on Apple Silicon (Apple7+ / Mac2 GPU families), MVKDevice.mm initLimits() and
# initMetalFeatures(); Metal-runtime figures (threads per threadgroup, threadgroup memory)
# are those Apple's Metal feature set tables give for these GPUs.
_APPLE_LIMITS = {
    "maxStorageBufferRange": 2**32 - 1,        # min(MTLDevice.maxBufferLength, UINT32_MAX)
    "maxUniformBufferRange": 2**32 - 1,        # Apple1+: as the storage range
    "maxPushConstantsSize": 4096,              # 4 * KIBI
    "maxComputeWorkGroupCount": (2**30,) * 3,  # kMVKUndefinedLargeUInt32
    "maxComputeWorkGroupInvocations": 1024,    # max of maxThreadsPerThreadgroup
    "maxComputeWorkGroupSize": (1024, 1024, 1024),
    "maxComputeSharedMemorySize": 32768,       # maxThreadgroupMemoryLength
    "maxBoundDescriptorSets": 8,               # kMVKMaxDescriptorSetCount (SPIRV-Cross kMaxArgumentBuffers)
    "maxPerStageDescriptorStorageBuffers": 31, # maxPerStageBufferCount
    "maxPerStageDescriptorUniformBuffers": 31,
    "maxPerStageDescriptorStorageImages": 128, # maxPerStageTextureCount (Apple6+; 256 with tier-2 arg. buffers)
    "maxPerStageDescriptorSampledImages": 128,
    "maxPerStageDescriptorSamplers": 16,       # maxPerStageSamplerCount
    "maxPerStageResources": 31 + 128,          # buffers + textures
    "maxImageDimension2D": 16384,              # maxTextureDimension (Apple3..Apple9)
}

# The Vulkan 1.2 required limits (spec table "Required Limits"), raised where Caliper needs
# more: its views use 256-invocation workgroups (16x16 tiles, 256-wide 1-D jobs; the spec
# minimum is 128 with sizes 128x128x64) and bind up to 8 storage buffers (minimum 4).
_MINIMAL_LIMITS = {
    "maxStorageBufferRange": 2**27,
    "maxUniformBufferRange": 16384,
    "maxPushConstantsSize": 128,
    "maxComputeWorkGroupCount": (65535,) * 3,
    "maxComputeWorkGroupInvocations": 256,
    "maxComputeWorkGroupSize": (256, 256, 64),
    "maxComputeSharedMemorySize": 16384,
    "maxBoundDescriptorSets": 4,
    "maxPerStageDescriptorStorageBuffers": 8,
    "maxPerStageDescriptorUniformBuffers": 12,
    "maxPerStageDescriptorStorageImages": 4,
    "maxPerStageDescriptorSampledImages": 16,
    "maxPerStageDescriptorSamplers": 16,
    "maxPerStageResources": 128,
    "maxImageDimension2D": 4096,
}

# VkPhysicalDevicePortabilitySubsetFeaturesKHR as MoltenVK fills it on Apple Silicon
# (MVKDevice.mm getFeatures): only the members it reports false are listed; the engine
# checks the ones its graphics path could touch (graphics.py).
_APPLE_PORTABILITY = {
    "pointPolygons": False,
    "samplerMipLodBias": False,  # true only on Apple10 GPUs
    "tessellationIsolines": False,
    "tessellationPointMode": False,
    "minVertexInputBindingStrideAlignment": 4,  # vertexStrideAlignment (1 on Apple5+, 4 before)
}


class ProfileError(ValueError):
    """An unknown profile name; the message lists the known ones."""


@dataclass(frozen=True)
class Profile:
    """What a device class lacks, relative to whatever device runs the engine.

    ``features`` are Vulkan feature names forced off; ``hide`` are extensions removed;
    ``keep_only``, when set, removes every extension not in it; ``limits`` are upper
    bounds; ``host_pointer_alignment`` is a lower bound on
    ``minImportedHostPointerAlignment``; ``portability`` is the
    ``VK_KHR_portability_subset`` restrictions the engine must respect.
    """

    name: str
    summary: str
    features: frozenset = frozenset()
    hide: frozenset = frozenset()
    keep_only: frozenset | None = None
    limits: dict = field(default_factory=dict)
    host_pointer_alignment: int = 0
    portability: dict | None = None
    api_version: tuple = (1, 3)


APPLE = Profile(
    name="apple",
    summary="MoltenVK on Apple Silicon: no 64-bit atomics, 16 KiB host pages, no fd/win32 handles",
    features=frozenset({"shaderBufferInt64Atomics"}),
    hide=_NOT_IN_MOLTENVK,
    limits=_APPLE_LIMITS,
    host_pointer_alignment=16384,
    portability=_APPLE_PORTABILITY,
)

PROFILES = {
    p.name: p
    for p in (
        APPLE,
        replace(APPLE, name="apple-nohost",
                summary="apple with VK_EXT_external_memory_host hidden (MoltenVK releases whose "
                        "host imports fail: issues 2619, 2806); CPU tensors take host staging",
                hide=_NOT_IN_MOLTENVK | {"VK_EXT_external_memory_host"}),
        Profile(
            name="minimal",
            summary="Vulkan 1.2 core with timeline semaphores and shaderInt64, nothing else optional",
            features=frozenset({"shaderBufferInt64Atomics", "shaderRoundingModeRTEFloat32"}),
            keep_only=frozenset({"VK_KHR_swapchain"}),
            limits=_MINIMAL_LIMITS,
            api_version=(1, 2),
        ),
    )
}


def resolve(profile: str | Profile | None = None) -> Profile | None:
    """The profile to apply: ``profile`` when given, else ``CALIPER_VK_PROFILE``; None for none."""
    if isinstance(profile, Profile):
        return profile
    name = profile if profile is not None else os.environ.get(PROFILE_ENV, "")
    name = name.strip().lower()
    if name in ("", "none"):
        return None
    if name not in PROFILES:
        raise ProfileError(
            f"{PROFILE_ENV}={name!r} is not a device profile; known profiles: "
            f"{', '.join(PROFILES)} (or unset it for the device as it is)")
    return PROFILES[name]


def _lower(have, bound):
    """The tighter of a device limit and a profile bound (element-wise for tuples)."""
    if isinstance(have, tuple):
        return tuple(min(h, b) for h, b in zip(have, bound, strict=True))
    return min(have, bound)


def apply(info, profile: Profile | None, used=()):
    """``info`` as a device of ``profile``'s class reports itself (``info`` itself when None).

    The returned info's ``profile_changes`` lists, in words, each feature hidden, each
    extension hidden that the engine could use (``used``) or the profile names, the count
    of the others, and each limit lowered (with the device's and the profile's value).
    """
    if profile is None:
        return info
    changes = []
    features = dict(info.features)
    for name in sorted(profile.features):
        if features.get(name):
            features[name] = False
            changes.append(f"feature {name} hidden")
    extensions = info.extensions - profile.hide
    if profile.keep_only is not None:
        extensions = extensions & profile.keep_only
    hidden = info.extensions - extensions
    named = hidden & (frozenset(used) | profile.hide)
    changes += [f"extension {e} hidden" for e in sorted(named)]
    if hidden - named:
        changes.append(f"{len(hidden - named)} other extensions hidden (the engine uses none of them)")
    limits = dict(info.limits)
    for name, bound in profile.limits.items():
        lowered = _lower(limits[name], bound)
        if lowered != limits[name]:
            changes.append(f"limit {name} {limits[name]} -> {lowered}")
            limits[name] = lowered
    align = info.host_pointer_alignment
    if "VK_EXT_external_memory_host" not in extensions:
        align = 0
    elif profile.host_pointer_alignment > align:
        changes.append(f"minImportedHostPointerAlignment {align} -> {profile.host_pointer_alignment}")
        align = profile.host_pointer_alignment
    major, minor = profile.api_version
    api = info.api_version_int
    if api >= ((major << 22) | ((minor + 1) << 12)):  # a newer minor version than the class has
        api = (major << 22) | (minor << 12)
        changes.append(f"Vulkan {info.api_version} -> {major}.{minor}")
    if profile.portability:
        changes.append("VK_KHR_portability_subset restrictions: " + ", ".join(
            f"{k}={v}" for k, v in profile.portability.items()))
    return replace(
        info,
        name=f"{info.device_name} [profile {profile.name}]",
        api_version=f"{api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}",
        api_version_int=api,
        extensions=frozenset(extensions),
        features=features,
        timeline_semaphore=features.get("timelineSemaphore", False),
        buffer_int64_atomics=features.get("shaderBufferInt64Atomics", False),
        shader_int64=features.get("shaderInt64", False),
        limits=limits,
        max_storage_buffer_range=limits["maxStorageBufferRange"],
        max_compute_workgroup_count=limits["maxComputeWorkGroupCount"],
        host_pointer_alignment=align,
        portability=dict(profile.portability) if profile.portability else info.portability,
        profile=profile.name,
        profile_changes=tuple(changes),
    )
