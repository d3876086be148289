"""``caliper doctor``'s version checks (docs/platforms.md's minimums), fed the versions a Mac, an
old Linux machine and a Windows PC would show."""

from caliper_vk.doctor import version_checks
from caliper_vk.engine._vk import api_version

V13, V11 = api_version(1, 3, 280), api_version(1, 1, 0)


def checks(*args, **kw) -> dict:
    return {c.name: c for c in version_checks(*args, **kw)}


def test_a_current_linux_or_windows_machine_passes_and_asks_nothing_of_macos():
    got = checks("Linux", V13, "llvmpipe", V13)
    assert set(got) == {"Vulkan loader", "Vulkan driver"} and all(c.ok for c in got.values())
    assert "1.3.280" in got["Vulkan loader"].detail
    assert set(checks("Windows", V13, "RTX", V13)) == {"Vulkan loader", "Vulkan driver"}


def test_too_old_loaders_and_drivers_are_named():
    got = checks("Linux", None, "old GPU", V11)
    assert not got["Vulkan loader"].ok and "1.0.0 is too old" in got["Vulkan loader"].detail
    assert not got["Vulkan driver"].ok and "old GPU speaks Vulkan 1.1.0, too old" in got["Vulkan driver"].detail


def test_macos_and_moltenvk_minimums():
    good = checks("Darwin", V13, "Apple M2", V13, "14.5", (1, 4, 2))
    assert all(c.ok for c in good.values()) and good["MoltenVK"].detail == "1.4.2"
    old_mac = checks("Darwin", V13, "Apple M1", V13, "12.2.1", (1, 4, 2))["macOS"]
    assert not old_mac.ok and "too old for MPS" in old_mac.detail and "12.3" in old_mac.detail
    assert checks("Darwin", V13, "Apple M1", V13, "12.3", (1, 4, 2))["macOS"].ok
    old_mvk = checks("Darwin", V13, "Apple M1", V13, "13.0", (1, 1, 12))["MoltenVK"]
    assert not old_mvk.ok and "1.1.12 is too old" in old_mvk.detail and ">= 1.2.0" in old_mvk.detail
    heap = checks("Darwin", V13, "Apple M1", V13, "13.0", (1, 3, 0), heap="MTLHeap bug: set it to 0")
    assert not heap["MoltenVK"].ok and heap["MoltenVK"].detail == "MTLHeap bug: set it to 0"
    assert not checks("Darwin", V13, "KosmicKrisp", V13, "15.0", None)["MoltenVK"].ok
