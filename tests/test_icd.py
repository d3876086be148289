"""An NVIDIA GPU without its Vulkan driver: ``caliper doctor``, the status line and the self-test
name the cause (a container without the graphics capability, a compute-only driver, a manifest
whose library does not load) and the fix, instead of drawing on lavapipe without a word."""

from types import SimpleNamespace

import pytest

import caliper_vk as cv
from caliper_vk import doctor
from caliper_vk.engine import icd

CPU = SimpleNamespace(vendor_id=0x10005, kind="cpu", name="llvmpipe")
NVIDIA = SimpleNamespace(vendor_id=0x10DE, kind="discrete", name="NVIDIA H200")
GPU = ["NVIDIA H200"]


def gap(devices=(CPU,), gpus=GPU, manifests=(), env=None, glx=""):
    return icd.missing_nvidia_icd(list(devices), gpus=gpus, manifests=list(manifests), env=env or {},
                                  glx_library=glx)


def test_no_gap_without_an_nvidia_gpu_or_with_its_vulkan_device():
    assert gap(gpus=[]) is None
    assert gap(devices=(CPU, NVIDIA)) is None


def test_a_container_without_the_graphics_capability():
    why = gap(env={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"})
    assert why.startswith("NVIDIA H200 has no Vulkan device: this container was started with "
                          "NVIDIA_DRIVER_CAPABILITIES=compute,utility, without 'graphics'")
    assert "NVIDIA_DRIVER_CAPABILITIES=all" in why
    assert gap(env={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility,graphics"}) != why


def test_a_compute_only_driver_and_a_missing_manifest_and_a_library_that_does_not_load():
    assert "compute-only install (no libGLX_nvidia.so.0, no nvidia_icd.json)" in gap()
    assert "libnvidia-gl-<driver version>" in gap()
    assert "no nvidia_icd.json names it" in gap(glx="libGLX_nvidia.so.0")
    why = gap(manifests=["/usr/share/vulkan/icd.d/nvidia_icd.json"], glx="libGLX_nvidia.so.0")
    assert "reads /usr/share/vulkan/icd.d/nvidia_icd.json but lists no NVIDIA device" in why
    assert "VK_LOADER_DEBUG=driver" in why


def test_gpus_are_read_from_the_kernel_driver(tmp_path):
    (tmp_path / "gpus/0000:01:00.0").mkdir(parents=True)
    (tmp_path / "gpus/0000:01:00.0/information").write_text("Model: \t NVIDIA H200\nIRQ: 42\n")
    assert icd.nvidia_gpus(proc=tmp_path / "gpus", dev=tmp_path) == ["NVIDIA H200"]
    assert icd.nvidia_gpus(proc=tmp_path / "none", dev=tmp_path) == []
    (tmp_path / "nvidia0").touch()
    assert icd.nvidia_gpus(proc=tmp_path / "none", dev=tmp_path) == ["an NVIDIA GPU (/dev/nvidia0)"]


def test_manifests_listed_by_the_environment_replace_the_search(tmp_path):
    (tmp_path / "nvidia_icd.json").write_text("{}")
    assert icd.nvidia_manifests(dirs=[str(tmp_path)], env={}) == [str(tmp_path / "nvidia_icd.json")]
    assert icd.nvidia_manifests(dirs=[str(tmp_path)], env={"VK_DRIVER_FILES": "/x/lvp_icd.json"}) == []


WHY = "NVIDIA H200 has no Vulkan device: this container was started without 'graphics'"


@pytest.fixture
def no_icd(monkeypatch):
    monkeypatch.setattr(icd, "missing_nvidia_icd", lambda devices, **kw: WHY)
    monkeypatch.setattr(doctor, "missing_nvidia_icd", lambda devices, **kw: WHY)
    monkeypatch.setattr(icd, "_note", {})
    monkeypatch.delenv("CALIPER_VK_DEVICE", raising=False)


def test_doctor_and_the_status_line_name_the_cause(no_icd, device):
    assert f"[ no] NVIDIA Vulkan driver: {WHY}" in doctor.report()
    if device.info.kind != "cpu":
        pytest.skip(f"n/a on this machine: the status line notes it on a CPU device ({device.info.kind} here)")
    with cv.Session(window=False, size=(64, 64)) as s:
        assert s.status().line().startswith(f"{device.info.name} (cpu) [{WHY}]")
