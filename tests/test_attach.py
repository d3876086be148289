"""attach(): the v1 contract at the API — zero-copy where possible, refusals that name the fix."""

import gc

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk import chrome, exporters
from caliper_vk.engine import default_device
from images import assert_same_image
from device_paths import cpu_path, host_import

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)


@pytest.fixture
def session():
    with cv.Session(window=False, size=(160, 120)) as s:
        yield s


def test_empty_is_page_aligned_and_zero_copy(session):
    t = cv.empty((100, 3))
    assert t.data_ptr() % 4096 == 0 and t.is_contiguous()
    panel = session.attach(t, "pointcloud")
    assert panel.path == cpu_path()
    assert ("caliper_vk.empty()" if host_import() else "lacks VK_EXT_external_memory_host") in panel.reason


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32,
                                   torch.uint8])
def test_ordinary_cpu_tensors_are_read_in_place_in_every_dtype(session, dtype, artifacts):
    t = (torch.randn(24, 40) * 50).to(dtype)
    panel = session.attach(t, "heatmap")
    assert panel.path == cpu_path()
    assert_same_image(session.render(), session.canvas.reference(), artifacts)


def test_writes_in_place_show_in_the_next_frame(session, artifacts):
    t = cv.empty((500, 3))
    t.copy_(torch.randn(500, 3))
    panel = session.attach(t, "pointcloud", labels=np.arange(500) % 10)
    first = session.render()
    with panel.writing():
        t.mul_(-1.0)
    second = session.render()
    assert not np.array_equal(first, second)
    assert_same_image(second, session.canvas.reference(), artifacts)


def test_view_with_storage_offset_renders_only_its_own_elements(session):
    base = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64)
    part = base[32:]  # contiguous, storage offset 2048
    assert part.storage_offset() == 2048 and part.is_contiguous()
    panel = session.attach(part, "heatmap")
    assert panel.path == cpu_path()
    session.render()
    assert panel.view.seen_range == (2048.0, 4095.0)


@pytest.mark.parametrize("make, what", [
    (lambda: torch.zeros(8, 3).T, "transpose"),
    (lambda: torch.zeros(8, 6)[:, ::2], "strided slice"),
    (lambda: torch.zeros(1, 3).expand(8, 3), "expand"),
    (lambda: torch.zeros(2, 3, 4, 4).to(memory_format=torch.channels_last), "channels-last"),
    (lambda: torch.zeros(4, 4, 3).permute(2, 0, 1), "permute"),
])
def test_non_contiguous_views_are_refused_with_the_fix(session, make, what):
    with pytest.raises(exporters.NotContiguousError, match=r"not contiguous .*\.contiguous\(\)"):
        session.attach(make(), "heatmap", name="x")
    assert session.panels == []


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bool, torch.complex64,
                                   torch.int16])
def test_unsupported_dtypes_list_the_accepted_ones(session, dtype):
    with pytest.raises(exporters.UnsupportedDtypeError,
                       match="Caliper reads float32, float16, bfloat16, int32, uint8"):
        session.attach(torch.zeros(4, 3, dtype=dtype), "pointcloud")


def test_tensor_deleted_by_the_user_stays_drawable(session, artifacts):
    t = torch.randn(300, 3)
    panel = session.attach(t, "pointcloud")
    before = session.render()
    expected = panel.view.positions.copy()
    del t
    gc.collect()
    [torch.randn(300, 3) for _ in range(50)]  # churn the allocator
    after = session.render()
    assert np.array_equal(panel.view.positions, expected)
    bar = chrome.line_height()  # the title bar now says the tensor is gone: all but it and the status line
    assert_same_image(after[bar:-20], before[bar:-20], artifacts)
    assert panel.stale_since is not None and "not updated since step" in session.status().line()


def test_resized_storage_stops_the_panel_not_training(session, capsys):
    t = torch.randn(10, 3)
    panel = session.attach(t, "pointcloud", name="emb")
    session.render()
    with pytest.raises(RuntimeError, match="not resizable"):
        t.resize_(1000, 3)  # torch refuses: the storage is shared with the renderer
    t.set_(torch.randn(1000, 3))  # the tensor now reads other memory than the panel
    session.step()
    assert panel.error and "resized, replaced or reshaped" in panel.error
    assert "emb: stopped" in session.status().line()
    assert "caliper: emb's storage was resized" in capsys.readouterr().err
    assert session.step() in (True, False)  # keeps going


def test_meta_tensors_hold_no_data_and_are_refused_clearly():
    with pytest.raises(exporters.ContractError, match="meta device, which holds no data"):
        exporters.export(torch.empty(4, 3, device="meta"), default_device().info, "x")


def test_too_large_is_refused_clearly():
    info = default_device().info
    with pytest.raises(exporters.TooLargeError, match="maxStorageBufferRange"):
        exporters.check_tensor(torch.empty(info.max_storage_buffer_range // 4 + 1), "big",
                               info.max_storage_buffer_range)


def test_close_detaches_and_frees_the_import(session):
    t = cv.empty((100, 3))
    panel = session.attach(t, "pointcloud")
    session.render()
    panel.close()
    panel.close()  # harmless
    assert session.panels == []
    session.render()
    session.device.wait()
    assert session.device.pending_releases == 0


def test_status_names_device_path_and_counts(session):
    emb, attn = cv.empty((10, 3)), torch.zeros(4, 4)  # held by the loop: live, not stale
    session.attach(emb, "pointcloud", name="emb")
    session.attach(attn, "heatmap", name="attn")
    session.render()
    st = cv.Session.status(session)
    assert [p[:2] for p in st.panels] == [("emb", cpu_path()), ("attn", cpu_path())]
    line = st.line()
    for part in ("llvmpipe" if "llvmpipe" in st.device else "", f"emb: {cpu_path()}", "step",
                 "skipped", "frame"):
        assert part in line


def test_step_skips_while_a_frame_is_in_flight(session):
    t = cv.empty((200_000, 3))
    t.copy_(torch.randn(200_000, 3))
    session.attach(t, "pointcloud")
    assert session.step() is True
    results = [session.step() for _ in range(3)]  # issued at once: the first frame is still drawing
    assert False in results
    assert session.skipped >= 1


def test_forced_staging_says_so_and_stays_exact(session, artifacts):
    t = cv.empty((300, 3))
    t.copy_(torch.randn(300, 3))
    panel = session.attach(t, "pointcloud", zero_copy=False, name="emb")
    assert panel.path == "host staging"
    if host_import():
        assert panel.reason == "zero_copy=False was requested"
    else:  # the device (profile) cannot import anyway: that is the reason given
        assert "lacks VK_EXT_external_memory_host" in panel.reason
    assert f"emb: host staging ({panel.reason})" in session.status().line()
    with panel.writing():
        t.mul_(3.0)
    assert_same_image(session.render(), session.canvas.reference(), artifacts)


def test_zero_copy_adds_no_copy_of_the_tensor_and_staging_exactly_one():
    with cv.Session(window=False, size=(160, 120), history=None) as s:  # the history copies on purpose
        _zero_copy_adds_no_copy_and_staging_exactly_one(s)


def _zero_copy_adds_no_copy_and_staging_exactly_one(session):
    if not host_import():
        pytest.skip(f"n/a on this device: {session.device.info.name} imports no host memory, both paths stage")
    n = 100_000
    stats = session.device.memory_stats
    results = {}
    for zero_copy in (True, False):
        t = cv.empty((n, 3))
        session.render()
        before = dict(stats)
        panel = session.attach(t, "pointcloud", zero_copy=zero_copy)
        session.render()
        after = dict(stats)
        results[zero_copy] = (after["allocated_bytes"] - before["allocated_bytes"],
                              after["imported_bytes"] - before["imported_bytes"])
        panel.close()
        session.render()
    grown_zero, imported_zero = results[True]
    grown_staging, imported_staging = results[False]
    assert imported_zero >= n * 12 and imported_staging == 0
    # staging allocates the same fixed state plus exactly one buffer holding the tensor's bytes
    assert grown_staging - grown_zero == pytest.approx(n * 12, abs=4096)


def test_a_storage_replaced_outside_writing_is_noticed_at_the_next_step(capsys):
    """``t.set_(...)`` outside ``panel.writing()``: the very frame drawn at the next step shows
    the notice in the panel's place, not the old storage, and the status line stops saying
    zero-copy (the panel stops, with the fix in its message; it is not re-imported)."""
    from caliper_vk.engine import Rect

    with cv.Session(window=False, size=(320, 200)) as s:
        t = cv.empty((16, 16))
        t.fill_(1.0)
        panel = s.attach(t, "heatmap", name="x")
        s.render()
        path = cpu_path()  # zero-copy, or host staging on a device without host import (profiles)
        assert f"x: {path}" in s.status().line() and panel.view.seen_range == (1.0, 1.0)
        t.set_(torch.full((16, 16), 5.0))  # the tensor now lives in other memory
        frame = s.render()  # the first frame after the change
        assert panel.error and "replaced" in panel.error
        assert panel.view.rect is None, "the view (the old storage) was still drawn"
        lh = chrome.line_height()
        body = Rect(panel.slot.x, panel.slot.y + lh, panel.slot.width, panel.slot.height - lh)
        got = frame[body.y:body.y + body.height, body.x:body.x + body.width]
        assert np.array_equal(got, panel.notice.reference(body.width, body.height))
        line = s.status().line()
        assert "x: stopped" in line and path not in line, line
    assert "caliper: x's storage was resized, replaced or reshaped" in capsys.readouterr().err
