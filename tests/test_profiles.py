"""Device profiles: each hides what it says, nothing hidden is enabled, and the engine
and the live API see only the profile's device (docs/profiles.md)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk import doctor, exporters
from caliper_vk.engine import ComputePipeline, Device, Instance, StorageImage, limits, shaders
from caliper_vk.engine.instance import VALIDATION_LOG
from caliper_vk.engine.profiles import PROFILE_ENV, PROFILES, ProfileError
from caliper_vk.exporters import cpu
from images import assert_same_image

FD_AND_WIN32 = ("VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd",
                "VK_KHR_external_memory_win32", "VK_KHR_external_semaphore_win32")
HEATMAP_BINDINGS = ["uniform", "buffer", "buffer", "image"]


@pytest.fixture(scope="module")
def devices():
    """One device per profile, all in this process (the profile is per instance)."""
    made = {name: Device(Instance(profile=name)) for name in PROFILES}
    yield made
    for d in made.values():
        instance = d.instance
        d.close()
        instance.close()


@pytest.mark.parametrize("name", list(PROFILES))
def test_each_profile_hides_what_it_says_and_enables_nothing_hidden(devices, name):
    profile, device = PROFILES[name], devices[name]
    info = device.info
    assert info.profile == name and f"[profile {name}]" in info.name
    assert not info.buffer_int64_atomics and not device.features["buffer_int64_atomics"]
    assert info.shader_int64 == device.features["shader_int64"] == info.features["shaderInt64"]
    assert device.features["timeline_semaphore"]  # every profile keeps timeline semaphores
    enabled = set(device.extensions)
    assert not enabled & set(FD_AND_WIN32) and not info.extensions & set(FD_AND_WIN32)
    assert enabled <= info.extensions  # nothing the profile hid reaches vkCreateDevice
    for limit, bound in profile.limits.items():
        assert np.all(np.asarray(info.limits[limit]) <= np.asarray(bound)), limit
    assert info.max_storage_buffer_range == info.limits["maxStorageBufferRange"]
    host = info.has("VK_EXT_external_memory_host")
    assert host == (name == "apple") and ("VK_EXT_external_memory_host" in enabled) == host
    assert info.host_pointer_alignment == (16384 if host else 0)
    if name == "minimal":
        assert info.extensions <= {"VK_KHR_swapchain"} and info.api_version.startswith("1.2")


def test_unknown_profile_is_refused_with_the_known_ones(monkeypatch):
    with pytest.raises(ProfileError, match="known profiles: apple, apple-nohost, minimal"):
        Instance(profile="mac")
    monkeypatch.setenv(PROFILE_ENV, "Intel-Mac")
    with pytest.raises(ProfileError, match=f"{PROFILE_ENV}='intel-mac' is not a device profile"):
        Instance(validation=False)


def test_doctor_names_the_profile_and_what_it_hides(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV, "apple-nohost")
    out = doctor.report()
    assert "Device profile: apple-nohost (CALIPER_VK_PROFILE)" in out
    assert "hides/lowers: feature shaderBufferInt64Atomics hidden" in out
    assert "hides/lowers: extension VK_EXT_external_memory_host hidden" in out
    assert "[ no] host-pointer import" in out
    monkeypatch.delenv(PROFILE_ENV)
    assert "Device profile: none (CALIPER_VK_PROFILE unset; known: apple, apple-nohost, minimal)" \
        in doctor.report()


def test_a_hidden_feature_is_really_off_at_the_device(devices):
    """The validation layer, not only the engine, refuses a shader that uses a hidden feature:
    the engine's own check is bypassed here to show the device was created without it."""
    device = devices["apple"]
    spirv = shaders.compile_glsl("""#version 450
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_EXT_shader_atomic_int64 : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B { uint64_t v[]; };
void main() { atomicMin(v[gl_GlobalInvocationID.x], uint64_t(1)); }
""", "atomics64.comp")
    assert 12 in limits.spirv_requirements(spirv)[0]  # the Int64Atomics capability
    with pytest.raises(limits.DeviceLimitError, match=r"needs shaderBufferInt64Atomics .*\[profile apple\]"):
        ComputePipeline(device, spirv, ["buffer"], name="atomics64")
    before = len(VALIDATION_LOG)  # every instance's errors, in order
    check = limits.check_pipeline
    limits.check_pipeline = lambda *a: None
    try:
        ComputePipeline(device, spirv, ["buffer"], name="atomics64").close()
    finally:
        limits.check_pipeline = check
        device.wait()
    layer = VALIDATION_LOG[before:]
    del VALIDATION_LOG[before:]  # the errors this test provoked on purpose
    assert any("Int64Atomics" in e or "shaderBufferInt64Atomics" in e for e in layer), layer


def test_a_device_without_shader_int64_is_refused_naming_the_feature():
    no_int64 = replace(PROFILES["minimal"], name="no-int64", features=frozenset(
        {"shaderBufferInt64Atomics", "shaderInt64"}))
    instance = Instance(profile=no_int64)
    with Device(instance) as device:
        assert not device.features["shader_int64"]
        with pytest.raises(limits.DeviceLimitError, match=r"the heatmap shader needs shaderInt64 \(64-bit"):
            ComputePipeline(device, shaders.load("heatmap"), HEATMAP_BINDINGS, name="heatmap")
    instance.close()


def test_lowered_limits_reach_every_caller():
    small = replace(PROFILES["minimal"], name="small", limits={
        **PROFILES["minimal"].limits, "maxStorageBufferRange": 1 << 20,
        "maxComputeWorkGroupInvocations": 128, "maxComputeWorkGroupSize": (128, 128, 64)})
    instance = Instance(profile=small)
    with Device(instance) as device:
        with pytest.raises(exporters.TooLargeError, match="at most 1,048,576 bytes"):
            exporters.export(torch.zeros(512, 1024), device.info)
        with pytest.raises(limits.DeviceLimitError, match=r"16x16x1 \(256 invocations\).* allows 128"):
            ComputePipeline(device, shaders.load("heatmap"), HEATMAP_BINDINGS, name="heatmap")
        with pytest.raises(limits.DeviceLimitError, match=r"5000x8 image exceeds .* of 4096"):
            StorageImage(device, 5000, 8)
    instance.close()


def test_apple_host_import_uses_16k_pages_and_stays_exact(devices, artifacts):
    device = devices["apple"]
    assert cpu.PAGE % device.info.host_pointer_alignment == 0  # empty() memory imports as it is
    base = torch.arange(300 * 64, dtype=torch.float32).reshape(300, 64)
    with cv.Session(window=False, size=(160, 120), device=device) as s:
        fresh = cv.empty((40, 64))
        fresh.copy_(torch.randn(40, 64))
        for t, offset in ((fresh, 0), (base[37:], 37 * 64 * 4)):
            panel = s.attach(t, "heatmap")
            assert panel.path == "zero-copy" and t.storage_offset() * 4 == offset
            imported = panel.source.imported
            start = t.data_ptr() - imported.offset
            assert start % 16384 == 0 and imported.size % 16384 == 0
            assert imported.offset == t.data_ptr() % 16384
            assert_same_image(s.render(), s.canvas.reference(), artifacts)
            panel.close()


def test_apple_nohost_stages_cpu_tensors_and_says_why(devices):
    device = devices["apple-nohost"]
    with cv.Session(window=False, size=(160, 120), device=device) as s:
        t = cv.empty((16, 16))
        panel = s.attach(t, "heatmap", name="w")
        assert panel.path == "host staging"
        s.render()
        line = s.status().line()
        assert "w: host staging (" in line
        assert "[profile apple-nohost] lacks VK_EXT_external_memory_host" in line
        with panel.writing():
            t.fill_(3.0)
        assert np.array_equal(s.render(), s.canvas.reference())


def test_a_driver_that_refuses_the_import_buffer_gets_staging(devices, monkeypatch):
    """MoltenVK 1.4.0-1.4.2 advertise host import but refuse its vkCreateBuffer (issues 2619,
    2806): the panel must stage and say so, not fail."""
    from caliper_vk.engine import external

    create = external.vk.vkCreateBuffer

    def refuse_external(dev, info, allocator):
        if info.pNext:  # VkExternalMemoryBufferCreateInfo: the import's buffer
            raise external.vk.VkErrorFeatureNotPresent()
        return create(dev, info, allocator)

    monkeypatch.setattr(external.vk, "vkCreateBuffer", refuse_external)
    with cv.Session(window=False, size=(120, 90), device=devices["apple"]) as s:
        panel = s.attach(cv.empty((8, 8)), "heatmap")
        assert panel.path == "host staging"
        assert "vkCreateBuffer refused a buffer for imported host memory" in panel.reason
        assert np.array_equal(s.render(), s.canvas.reference())
