"""Engine wrappers: selection, buffers, sync, deferred release, struct keep-alive."""

import gc

import numpy as np
import pytest
import vulkan as vk

from caliper_vk.engine import Buffer, Device, Instance, NoDeviceError, TimelineSemaphore
from caliper_vk.engine._vk import _stype_for, ffi, new


def test_selects_lavapipe_or_a_gpu(device):
    assert device.info.kind in ("discrete", "integrated", "virtual", "cpu")
    assert device.features["timeline_semaphore"]
    assert device.features["buffer_int64_atomics"]


def test_device_choice_by_environment(monkeypatch):
    with Instance(validation=False) as inst:
        first = inst.physical_devices()[0]
        monkeypatch.setenv("CALIPER_VK_DEVICE", str(first.index))
        assert inst.select().index == first.index
        monkeypatch.setenv("CALIPER_VK_DEVICE", first.name.split()[0].upper())
        assert inst.select().name == first.name
        monkeypatch.setenv("CALIPER_VK_DEVICE", "no-such-gpu")
        with pytest.raises(NoDeviceError, match="matches no device; available: 0: "):
            inst.select()


def test_host_visible_buffer_roundtrip(device):
    with Buffer(device, 40) as buf:
        buf.write(np.arange(10, dtype=np.uint32))
        assert buf.view(np.uint32, 10).tolist() == list(range(10))
        with pytest.raises(ValueError, match="overflow"):
            buf.write(np.zeros(11, np.uint32))


def test_device_local_buffer_has_no_mapping(device):
    with Buffer(device, 64, host_visible=False) as buf, pytest.raises(RuntimeError, match="no host"):
        buf.view(np.uint8)


def test_second_close_is_harmless(device):
    buf = Buffer(device, 16)
    buf.close()
    buf.close()
    sem = TimelineSemaphore(device)
    sem.close()
    sem.close()


def test_timeline_semaphore_host_signal_and_wait(device):
    with TimelineSemaphore(device, initial=3) as sem:
        assert sem.value == 3
        assert not sem.wait(4, timeout_ns=1_000_000)
        sem.signal(5)
        assert sem.wait(4, timeout_ns=0)
        assert sem.value == 5


def test_gpu_waits_for_and_signals_timeline(device):
    from caliper_vk.engine import Recorder

    with TimelineSemaphore(device) as sem, Buffer(device, 16) as buf:
        rec = Recorder(device).begin()
        rec.fill(buf, 7)
        rec.host_barrier()
        rec.end()
        serial = device.submit([rec.handle], wait=[(sem, 1)], signal=[(sem, 2)])
        assert not device.is_done(serial)  # blocked on value 1
        sem.signal(1)
        assert sem.wait(2, timeout_ns=5_000_000_000)
        device.wait(serial)
        assert buf.view(np.uint32, 4).tolist() == [7, 7, 7, 7]
        rec.close()


def test_release_is_deferred_until_the_gpu_is_done(device):
    from caliper_vk.engine import Recorder

    with TimelineSemaphore(device) as gate:
        buf = Buffer(device, 1 << 16)
        rec = Recorder(device).begin()
        rec.fill(buf, 1)
        rec.end()
        serial = device.submit([rec.handle], wait=[(gate, 1)])
        before = device.pending_releases
        buf.close()  # still used by the blocked submission
        assert device.pending_releases == before + 1
        gate.signal(1)
        device.wait(serial)
        assert device.pending_releases == 0
        rec.close()


def test_stype_is_derived_for_the_structs_the_engine_uses():
    for name, expected in [
        ("VkPhysicalDeviceIDProperties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES),
        ("VkPhysicalDeviceVulkan12Features",
         vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES),
        ("VkPhysicalDeviceExternalMemoryHostPropertiesEXT",
         vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT),
        ("VkTimelineSemaphoreSubmitInfo", vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO),
        ("VkImageViewCreateInfo", vk.VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO),
    ]:
        assert _stype_for(name) == expected, name


def test_new_keeps_nested_children_alive():
    info = new("VkInstanceCreateInfo",
               pApplicationInfo=new("VkApplicationInfo", pApplicationName="keep-me"),
               ppEnabledExtensionNames=["VK_A", "VK_B"], enabledExtensionCount=2)
    for _ in range(3):
        gc.collect()
        [ffi.new("char[]", b"x" * 64) for _ in range(1000)]  # churn the allocator
    assert ffi.string(info.pApplicationInfo.pApplicationName) == b"keep-me"
    assert ffi.string(info.ppEnabledExtensionNames[1]) == b"VK_B"


def test_unknown_field_is_an_error():
    with pytest.raises(AttributeError, match="has no field 'sizee'"):
        new("VkBufferCreateInfo", sizee=4)


def test_validation_layer_reports_errors():
    """A negative control: a deliberate misuse is caught and counted."""
    from caliper_vk.engine import Recorder
    from caliper_vk.engine.instance import VALIDATION_LOG

    before = len(VALIDATION_LOG)
    with Device(Instance(validation=True)) as dev, Buffer(dev, 64) as buf:
        rec = Recorder(dev).begin()
        rec.fill(buf, 0, offset=2, size=8)  # offset must be a multiple of 4; never submitted
        rec.end()
        rec.close()
        assert any("vkCmdFillBuffer" in e for e in dev.instance.validation_errors)
    dev.instance.close()
    del VALIDATION_LOG[before:]  # the deliberate errors of this control are not the suite's


SPEC_SHADER = """#version 450
layout(local_size_x = 4) in;
layout(constant_id = 0) const uint A = 1u;
layout(constant_id = 3) const uint B = 2u;
layout(std430, binding = 0) buffer Out { uint out_[]; };
void main() { out_[gl_GlobalInvocationID.x] = A * 1000u + B; }
"""


@pytest.fixture(scope="module")
def spec_spirv():
    from caliper_vk.engine import shaders

    try:
        return shaders.compile_glsl(SPEC_SHADER, "spec_test.comp")
    except shaders.CompilerMissingError as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("spec, want", [(None, 1002), ({0: 7}, 7002), ({0: 7, 3: 0xFFFFFFFF}, 6999)])
def test_specialization_constants_reach_the_shader(device, spec_spirv, spec, want):
    """ComputePipeline(specialization=...) sets a module's constant_id constants (ids need not
    be contiguous; unset ones keep their defaults)."""
    from caliper_vk.engine import ComputePipeline, Recorder

    pipe = ComputePipeline(device, spec_spirv, ["buffer"], "spec test", specialization=spec)
    with Buffer(device, 16) as buf:
        dset = pipe.bind([buf])
        rec = Recorder(device).begin()
        rec.dispatch(dset, 1)
        rec.host_barrier()
        rec.end()
        device.wait(device.submit([rec.handle]))
        assert buf.view(np.uint32, 4).tolist() == [want & 0xFFFFFFFF] * 4
        rec.close()
        dset.close()
    pipe.close()


def test_specialization_values_must_fit_32_bits(device, spec_spirv):
    from caliper_vk.engine import ComputePipeline

    with pytest.raises(ValueError, match="32-bit unsigned"):
        ComputePipeline(device, spec_spirv, ["buffer"], specialization={0: -1})
