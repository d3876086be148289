"""The renderer draws on torch's current CUDA device, found by its UUID among several GPUs.

Three fake Vulkan devices (two discrete GPUs and a CPU device, each with its own
``deviceUUID``) and a checked CUDA driver with three GPUs of the same UUIDs: the device
chosen is the one whose UUID is torch's current CUDA device's, through
``CUDA_VISIBLE_DEVICES`` and ``cuda:N``; ``CALIPER_VK_DEVICE`` still wins; without a CUDA
torch the old order (discrete first) holds.
"""

from dataclasses import replace

import pytest
import torch

from caliper_vk import exporters  # noqa: F401  (registers torch's CUDA device as the preference)
from caliper_vk.engine import instance as vk_instance
from caliper_vk.exporters import cuda_driver
from checked_cuda import CheckedDriver, driver_installed

UUIDS = [bytes([0xA0 + k]) * 16 for k in range(3)]


@pytest.fixture
def gpus(device, monkeypatch):
    if driver_installed():
        pytest.skip("a CUDA driver is installed: the checked calls would reach it")
    real = device.info
    kinds = [("GPU zero", "discrete"), ("GPU one", "discrete"), ("GPU two", "integrated"), ("llvmpipe", "cpu")]
    fakes = [replace(real, index=k, name=name, device_name=name, kind=kind,
                     device_uuid=UUIDS[k] if k < 3 else bytes(16)) for k, (name, kind) in enumerate(kinds)]
    inst = vk_instance.Instance.__new__(vk_instance.Instance)
    inst._devices = fakes
    drv = CheckedDriver(device, uuid=UUIDS[0], gpus=UUIDS[1:])
    monkeypatch.setattr(cuda_driver, "_driver", drv)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.delenv(vk_instance.DEVICE_ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return inst


def _current(monkeypatch, index):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: index)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_the_vulkan_device_is_torchs_current_cuda_device(gpus, monkeypatch, index):
    _current(monkeypatch, index)  # torch.cuda.set_device(index), or a tensor's cuda:N made current
    assert gpus.select().name == ["GPU zero", "GPU one", "GPU two"][index]


def test_cuda_visible_devices_is_honoured(gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    _current(monkeypatch, 0)  # cuda:0 is physical GPU 2
    assert gpus.select().name == "GPU two"
    _current(monkeypatch, 1)
    assert gpus.select().name == "GPU one"


def test_caliper_vk_device_still_wins(gpus, monkeypatch):
    _current(monkeypatch, 1)
    monkeypatch.setenv(vk_instance.DEVICE_ENV, "llvmpipe")
    assert gpus.select().name == "llvmpipe"
    assert gpus.select("0").name == "GPU zero"


def test_without_a_cuda_torch_the_first_discrete_gpu(gpus, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpus.select().name == "GPU zero"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    _current(monkeypatch, 5)  # no such CUDA device: no preference, the usual order
    assert gpus.select().name == "GPU zero"


def test_torch_not_initialised_means_cuda_0(gpus, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: pytest.fail("would initialise CUDA"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert gpus.select().name == "GPU one"
