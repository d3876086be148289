"""The GPU paths end to end: every built-in view in every supported dtype through the
zero-copy path against its numpy twin byte for byte, storage offsets, VMM allocation, a
racing producer (and its negative control), the another-device refusal, fd leaks.

Four backends run the same tests:

- ``cuda``: a real NVIDIA GPU (torch with CUDA, cuda-bindings and its driver); runs in
  ``ci/linux-cuda`` and ``ci/windows``, skips elsewhere with that reason;
- ``mps``: Apple Silicon (MoltenVK imports the MPS tensor's MTLBuffer); runs in ``ci/macos``;
- ``checked-cuda``: here, on lavapipe, through ``checked_cuda.CheckedDriver`` (the real
  cuda-bindings types, calls intercepted at the driver entry points). It shows the tests
  themselves are right and exercises the exporter's code; only the other two show a driver
  does what the API says (see docs/contract.md, "What is verified where");
- ``discrete``: here, on the emulated discrete GPU (``CALIPER_VK_EMULATE=discrete``,
  :mod:`caliper_vk.exporters.discrete`): ``caliper_vk.empty(device="cuda")`` memory that the
  host sees only through snapshots, so a twin or a parameter taken from a stale host copy fails.

Each panel is compared with its view's twin made from a ``.cpu()`` copy of the tensor taken
after ``flush()`` (what the device read, never the host copy made at attach), pixels and
counters; the copy's bytes are checked equal to the numpy input. A point cloud attached at
zeros then moved checks that what depends on the data (the fit) follows the device's memory.
A test that does not apply to a backend or platform skips with a reason starting "n/a on";
the hardware scripts count every other skip as a failure.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.exporters import discrete
from caliper_vk.selftest import TENSOR_VIEWS as VIEWS
from caliper_vk.selftest import sample
from images import assert_panel_matches_twin

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int32": torch.int32, "uint8": torch.uint8}
# view -> (shape, canvas size), and each view's sample values: the same as `caliper doctor --selftest`'s
ZERO_COPY_FRAMES = 300
# the hardware scripts run one backend each (CALIPER_HW_BACKENDS=cuda), so a skip there is a failure
BACKENDS = [b.strip() for b in
            os.environ.get("CALIPER_HW_BACKENDS", "cuda,mps,checked-cuda,discrete").split(",") if b.strip()]


def _cuda_ready() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA GPU (runs in ci/linux-cuda, ci/windows)"
    try:
        from checked_cuda import driver_installed
    except ImportError:
        return "needs a CUDA GPU with cuda-bindings (pip install 'caliper-vk[cuda]')"
    return None if driver_installed() else "needs a CUDA GPU: cuda-bindings finds no driver"


def _mps_ready() -> str | None:
    return None if torch.backends.mps.is_available() else "needs Apple Silicon with MPS (runs in ci/macos)"


def _checked_ready() -> str | None:
    try:
        from checked_cuda import driver_installed
    except ImportError:
        return "cuda-bindings is not installed (it is pinned in requirements-dev.txt)"
    if sys.platform != "linux":
        return "the checked driver maps lavapipe's memfds (Linux)"
    if driver_installed():
        return "a CUDA driver is installed: the real backend runs instead"
    return None


def _discrete_ready() -> str | None:
    return None  # the emulation needs no hardware; the fixture checks the device's host import


@pytest.fixture(params=BACKENDS)
def backend(request, device, monkeypatch):
    ready = {"cuda": _cuda_ready, "mps": _mps_ready, "checked-cuda": _checked_ready,
             "discrete": _discrete_ready}[request.param]
    why = ready()
    if why:
        pytest.skip(why)
    if request.param == "checked-cuda":
        if "VK_KHR_external_memory_fd" not in device.extensions:
            pytest.skip(f"{device.info.name} lacks VK_KHR_external_memory_fd")
        from checked_cuda import CheckedDriver, install

        install(monkeypatch, CheckedDriver(device), device)
    if request.param == "discrete":
        if not device.info.has("VK_EXT_external_memory_host"):
            pytest.skip(f"n/a on discrete under this device profile: {device.info.name} lacks "
                        "VK_EXT_external_memory_host, which the emulation imports its memory with")
        monkeypatch.setenv(discrete.EMULATE_ENV, "discrete")  # caliper_vk.empty(device="cuda") is emulated
        with discrete.emulate():  # and so are torch.cuda's synchronisations
            yield request.param
        return
    yield request.param


def zero_copy_tensor(backend: str, shape, dtype):
    """A tensor the renderer reads in place on ``backend``."""
    if backend == "mps":
        return torch.empty(shape, dtype=dtype, device="mps")  # every MPS tensor's MTLBuffer is imported
    return cv.empty(shape, dtype=dtype, device="cuda")


def on_backend(backend: str, tensor):
    """``tensor`` moved to the backend's device (the checked backend's stand-ins are host memory)."""
    if backend == "discrete":
        return discrete.to_device(tensor)
    return tensor if backend == "checked-cuda" else tensor.to(backend)


def raw(tensor) -> np.ndarray:
    return tensor.cpu().contiguous().view(torch.uint8).numpy()


def synchronize(backend: str) -> None:
    if backend in ("cuda", "discrete"):
        torch.cuda.synchronize()
    elif backend == "mps":
        torch.mps.synchronize()



@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_every_view_in_every_dtype_reads_the_tensor_in_place_like_its_twin(backend, view, dtype, artifacts):
    values = sample(view, dtype, seed=len(view) * 7 + len(dtype))
    want = torch.from_numpy(values).to(DTYPES[dtype])
    t = zero_copy_tensor(backend, values.shape, DTYPES[dtype])
    t.copy_(on_backend(backend, want))
    synchronize(backend)
    assert np.array_equal(raw(t), raw(want))  # the twin's input is the numpy input, bit for bit
    _, size = VIEWS[view]
    with cv.Session(window=False, size=size, budget=None) as s:
        panel = s.attach(t, view, name="x")
        assert panel.path == "zero-copy", panel.reason
        s.step(0)
        assert_panel_matches_twin(s.flush(), panel, t, artifacts)


def moving(step: int, n: int = 300) -> torch.Tensor:
    """Points that grow, drift and change sign from step to step (a fit made once is wrong later)."""
    rng = np.random.default_rng(step)
    pts = rng.normal(size=(n, 3)) * (0.5 + step ** 2) + (-1) ** step * 3.0 * step
    return torch.from_numpy(pts.astype(np.float32))


def test_a_point_cloud_attached_at_zeros_then_moving_matches_twins_of_cpu_copies(backend, artifacts):
    t = zero_copy_tensor(backend, (300, 3), torch.float32)
    t.zero_()  # what a panel attached before the first step reads
    synchronize(backend)
    with cv.Session(window=False, size=(200, 160), budget=None) as s:
        panel = s.attach(t, "pointcloud", name="emb", point_size_px=2)
        assert panel.path == "zero-copy", panel.reason
        s.step(0)
        s.flush()
        for step in range(1, 4):
            with panel.writing():
                t.copy_(on_backend(backend, moving(step)))
            s.step(step)
            frame = s.flush()
            assert_panel_matches_twin(frame, panel, t, artifacts / f"step{step}", point_size_px=2)
            assert panel.view.stats["drawn"] > 250, panel.view.stats  # fitted to this step's points


def test_a_view_with_a_storage_offset_reads_only_its_own_elements(backend):
    base = zero_copy_tensor(backend, (64, 64), torch.float32)
    base.copy_(on_backend(backend, torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)))
    synchronize(backend)
    part = base[32:]
    assert part.storage_offset() == 2048
    with cv.Session(window=False, size=(64, 64)) as s:
        panel = s.attach(part, "heatmap")
        assert panel.path == "zero-copy", panel.reason
        if backend != "discrete":  # the emulation imports the view's own first page (host pointer)
            assert panel.record.offset == 2048 * 4
        s.render()
        assert panel.view.seen_range == (2048.0, 4095.0)


@pytest.mark.skipif(sys.platform != "linux", reason="n/a on this platform: the VMM direction exports POSIX fds "
                                                   "(Linux)")
def test_vmm_allocation_is_zero_copy(backend, monkeypatch, artifacts):
    if backend in ("mps", "discrete"):
        pytest.skip(f"n/a on {backend}: VMM is CUDA's allocator")
    from caliper_vk.exporters import cuda

    monkeypatch.setenv(cuda.ALLOCATOR_ENV, "vmm")
    values = sample("pointcloud", "float32", seed=4)
    t = cv.empty(values.shape, device="cuda")
    t.copy_(on_backend(backend, torch.from_numpy(values)))
    synchronize(backend)
    assert isinstance(cuda.shared_memory_of(t), cuda.VmmMemory)
    with cv.Session(window=False, size=(128, 128), budget=None) as s:
        panel = s.attach(t, "pointcloud", name="emb")
        assert panel.path == "zero-copy", panel.reason
        s.step(0)
        assert_panel_matches_twin(s.flush(), panel, t, artifacts)


def racing_frames(backend: str, sync: bool, frames: int, stop_at_first_tear: bool = False) -> list:
    """A producer thread writing the tensor row block by row block (queued GPU kernels on
    cuda/mps) while the main thread steps the renderer; the frames' (min, max) seen."""
    t = zero_copy_tensor(backend, (256, 512), torch.float32)
    seen = []
    with cv.Session(window=False, size=(64, 64), sync=sync, max_fps=None, budget=None) as s:
        panel = s.attach(t, "heatmap", name="gen")
        assert panel.path == "zero-copy", panel.reason
        done = threading.Event()
        errors = []

        def produce():
            try:
                gen = 0
                while not done.is_set():
                    gen += 1
                    with panel.writing():
                        for row in range(0, 256, 32):
                            t[row:row + 32].fill_(float(gen))
            except Exception as exc:  # shown by the main thread
                errors.append(exc)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        last = s.frames
        bound = time.monotonic() + 300  # a safety bound, not a measurement: a stuck run fails
        try:
            while time.monotonic() < bound:
                s.step()
                if s.frames != last:
                    last = s.frames
                    seen.append(panel.view.seen_range)
                    if len(seen) >= frames or (stop_at_first_tear and seen[-1][0] != seen[-1][1]):
                        break
                if errors:
                    break
        finally:
            done.set()
            producer.join(timeout=30)
        assert not producer.is_alive(), "the producer is stuck (a stream deadlock?)"
        assert not errors, errors[0]
        s.flush()
    return seen


def test_no_torn_frames_with_a_racing_producer(backend):
    seen = racing_frames(backend, sync=True, frames=ZERO_COPY_FRAMES)
    torn = [r for r in seen if r[0] != r[1]]
    assert len(seen) >= ZERO_COPY_FRAMES and torn == [], f"{len(torn)} torn frames, first {torn[:3]}"
    assert len({r[0] for r in seen}) > 10  # the producer really raced the frames


def test_negative_control_a_racing_producer_tears_without_the_protocol(backend):
    if backend in ("checked-cuda", "discrete"):
        pytest.skip(f"n/a on {backend}: its stream is the producer's thread, so no write is ever in flight")
    seen = racing_frames(backend, sync=False, frames=2000, stop_at_first_tear=True)
    if not any(r[0] != r[1] for r in seen):
        pytest.fail(f"no torn frame in {len(seen)} frames without the protocol: the test cannot tell "
                    "the protocol works")


def test_other_cuda_tensors_are_mirrored_on_the_device(backend, artifacts):
    if backend in ("mps", "discrete"):
        pytest.skip(f"n/a on {backend}: every {backend} tensor is read in place (no mirror path)")
    values = sample("pointcloud", "float32", seed=8)
    if backend == "cuda":
        t = torch.from_numpy(values).cuda()
    else:
        from checked_cuda import stand_in

        t = stand_in(torch.from_numpy(values))
    with cv.Session(window=False, size=(128, 128)) as s:
        panel = s.attach(t, "pointcloud", name="emb")
        assert panel.path == "on-device copy" and panel.record.mirrored, panel.reason
        with panel.writing():
            t.mul_(-1.0)
        frame = s.render()
        assert_panel_matches_twin(frame, panel, t, artifacts)


def test_a_renderer_on_another_device_refuses_the_tensor(backend):
    if backend != "cuda":
        pytest.skip(f"n/a on {backend}: needs CUDA and a second Vulkan device (lavapipe, kept visible by "
                    "ci/linux-cuda)")
    from caliper_vk.engine import Device, Instance
    from caliper_vk.exporters import cuda

    others = [d for d in Instance(validation=False).physical_devices() if d.vendor_id != 0x10DE]
    if not others and os.environ.get("CALIPER_HW_SECOND_DEVICE") == "optional":
        pytest.skip("n/a on this machine: no second Vulkan device (add Mesa's lavapipe ICD to run it)")
    if not others:
        pytest.fail("no non-NVIDIA Vulkan device (lavapipe) is visible: the hardware script must keep "
                    "it (VK_DRIVER_FILES lists both ICDs)")
    with Device(choice=str(others[0].index)) as dev, cv.Session(window=False, size=(64, 64), device=dev) as s:
        with pytest.raises(cuda.DeviceMismatchError, match="only be shared on one GPU"):
            s.attach(torch.zeros(8, 3, device="cuda"), "pointcloud", name="emb")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                    reason="n/a on this platform: counts fds through /proc/self/fd (Linux)")
def test_no_fd_leak_over_attach_detach_cycles(backend):
    if backend in ("mps", "discrete"):
        pytest.skip(f"n/a on {backend}: its imports use no fds (MTLBuffers, host pointers)")
    import gc

    cycles = 1000 if backend == "cuda" else 100
    t = cv.empty((256, 3), device="cuda")
    other = torch.randn(256, 3, device="cuda") if backend == "cuda" else None
    if other is None:
        from checked_cuda import stand_in

        other = stand_in(torch.randn(256, 3))
    with cv.Session(window=False, size=(64, 64)) as s:
        s.attach(t, "pointcloud").close()  # first-use allocations out of the count
        s.device.wait()
        gc.collect()
        before = len(os.listdir("/proc/self/fd"))
        for i in range(cycles):
            panel = s.attach(t if i % 2 else other, "pointcloud")
            s.step()
            panel.close()
        s.device.wait()
        gc.collect()
        assert len(os.listdir("/proc/self/fd")) == before
