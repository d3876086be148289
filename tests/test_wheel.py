"""The package as a packager and a user get it: ``python -m build`` (isolated: sdist, then the wheel
from the sdist) on a PATH with no shader compiler; then the wheel installed as the README's
"Install" says (a fresh venv, CPU torch first, then ``caliper_vk-*.whl[demo]``) and every command
run from that venv, outside the checkout.

The isolated build and the fresh venv download their packages (pip's cache makes a rerun cheap);
``CALIPER_VK_SKIP_INSTALL_TESTS=1`` skips them where no package index is reachable.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(os.environ.get("CALIPER_VK_SKIP_INSTALL_TESTS") == "1",
                                reason="CALIPER_VK_SKIP_INSTALL_TESTS=1: no package index to install from")


def _python_only_path(tmp: Path) -> str:
    """A PATH holding only ``python`` (a wrapper for this interpreter): no glslc, no spirv-val."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return str(bin_dir)


def clean_copy(dest: Path) -> Path:
    """The checkout's files as a fresh clone has them (tracked, plus new files not ignored): no
    compiled SPIR-V, no baked atlas, and the build writes nothing into the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True)
    if listed.returncode != 0:  # not a git checkout: everything but what .gitignore names
        ignore = shutil.ignore_patterns(".git", ".venv", "build", "dist", "spv", "gen", "glyphs.npz",
                                        "*.egg-info", "__pycache__", "out", "test-artifacts", ".pytest_cache",
                                        ".ruff_cache")
        shutil.copytree(ROOT, dest, ignore=ignore)
        return dest
    files = listed.stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """(sdist, wheel, build log) from an isolated ``python -m build`` with no compiler on PATH."""
    if sys.platform == "win32":
        pytest.skip("the compiler-free PATH is built for POSIX shells")
    tmp = tmp_path_factory.mktemp("build")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VULKAN_SDK", "PYTHONPATH"))}
    env["PATH"] = _python_only_path(tmp)
    out = tmp / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "-o", str(out), str(clean_copy(tmp / "src"))],
                          capture_output=True, text=True, env=env, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    (sdist,) = out.glob("caliper_vk-*.tar.gz")
    (wheel,) = out.glob("caliper_vk-*.whl")
    return sdist, wheel, log


@pytest.fixture(scope="module")
def wheel(dist):
    return dist[1]


def test_the_wheel_is_built_from_the_sdists_spirv(dist):
    """The sdist ships the SPIR-V with the digest of the sources it was compiled from; the wheel built
    from it uses them (no compiler needed), and they are the checkout's sources."""
    import caliper_vk.views  # noqa: F401  (the views declare their passes: the digest covers their headers)
    from caliper_vk.engine import shaders  # the checkout's (the dev install is editable)

    sdist, _, log = dist
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        top = tar.getnames()[0].split("/")[0]
        digest = tar.extractfile(f"{top}/engine/shaders/spv/sources.sha256").read().decode().split()
    assert digest == [shaders.sources_digest()]
    assert {f"engine/shaders/spv/{s.stem}.spv" for s in shaders.sources()} <= names
    assert {"LICENSE", "caliper_vk/assets/fonts/DejaVuSansMono.ttf",
            "caliper_vk/assets/fonts/LICENSE-DejaVu.txt", "caliper_vk/assets/colormaps.npz",
            "caliper_vk/py.typed"} <= names
    assert "caliper_vk/assets/glyphs.npz" not in names  # baked from the font by every build
    assert "using the SPIR-V compiled from these sources (shipped in the sdist)" in log


def test_wheel_ships_spirv_licences_and_no_top_level_engine(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    spv = [n for n in names if n.endswith(".spv")]
    assert {Path(n).stem for n in spv} >= {"pointcloud_splat", "pointcloud_resolve", "heatmap",
                                           "heatmap_stats", "overlay_vs", "overlay_fs", "textgrid"}
    assert all(n.startswith("caliper_vk/engine/shaders/spv/") for n in spv)
    assert "caliper_vk/assets/glyphs.npz" in names  # the baked glyph atlas
    assert "caliper_vk/assets/colormaps.npz" in names  # the prebuilt colour tables
    assert "caliper_vk/web/page.html" in names  # the page of Session(window="web") and caliper view --web
    assert "caliper_vk/py.typed" in names
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert f"{dist_info}/licenses/LICENSE" in names
    assert f"{dist_info}/licenses/caliper_vk/assets/fonts/LICENSE-DejaVu.txt" in names
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert not any(n.startswith("engine/") for n in names)


def test_the_atlas_is_the_checkouts(wheel):
    """Every build rasterises the shipped font: the wheel's atlas is the one the tests' twins read."""
    import io

    import numpy as np

    from caliper_vk import glyphs

    with np.load(io.BytesIO(zipfile.ZipFile(wheel).read("caliper_vk/assets/glyphs.npz"))) as z:
        assert str(z["font"]) == "DejaVuSansMono.ttf"
        assert np.array_equal(z["atlas"], glyphs.atlas()[0])


def test_unpacked_wheel_renders_without_the_source_tree(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        "import numpy as np, caliper_vk, caliper_vk.engine.shaders as s\n"
        f"assert caliper_vk.__file__.startswith({str(site)!r}), caliper_vk.__file__\n"
        "s.find_compiler = None  # an installed wheel must not need a GLSL compiler\n"
        "from caliper_vk import Canvas, Heatmap\n"
        "with Canvas(32, 32) as c:\n"
        "    v = Heatmap(np.arange(16.0).reshape(4, 4)); c.add(v)\n"
        "    assert np.array_equal(c.render(), c.reference())\n"
        "print('ok')\n"
    )
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "CALIPER_VK_VALIDATION": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


def test_wheel_ships_every_example_run_with_its_sidecar(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    runs = sorted((ROOT / "caliper_vk" / "runs" / "examples").glob("*/run.json"))
    assert len(runs) >= 8
    for path in runs:
        rel = path.relative_to(ROOT).as_posix()
        assert rel in names
        data = json.loads(path.read_text()).get("data")  # caliper-run/2: the arrays' sidecar
        if data:
            assert f"{rel.rsplit('/', 1)[0]}/{data['file']}" in names, rel


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if sys.platform == "win32" else "bin") / name


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory):
    """A fresh venv with CPU torch (the version the dev environment pins) and the wheel with [demo]."""
    import torch

    root = tmp_path_factory.mktemp("venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = _bin(venv, "python")
    torch_pin = "torch==" + torch.__version__.split("+")[0]
    for args in ([torch_pin], [f"{dist[1]}[demo]"]):
        proc = subprocess.run([str(python), "-m", "pip", "install", *args], capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return venv


def run_in(venv: Path, cwd: Path, *cmd: str, timeout: int = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(_bin(venv, "")), env.get("PATH", "")])
    env.setdefault("CALIPER_VK_VALIDATION", "0")
    proc = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{out[-4000:]}"
    return out


def test_the_installed_wheel_works_as_the_readme_says(venv, tmp_path):
    python, caliper = str(_bin(venv, "python")), str(_bin(venv, "caliper"))
    where = run_in(venv, tmp_path, python, "-c", "import caliper_vk; print(caliper_vk.__file__)")
    assert where.strip().startswith(str(venv)), where  # the installed copy, not the checkout
    from caliper_vk import __version__

    assert run_in(venv, tmp_path, caliper, "--version").strip() == f"caliper {__version__}"
    run_in(venv, tmp_path, caliper, "doctor")
    attach = ("import torch, caliper_vk\n"
              "with caliper_vk.Session(window=False, size=(160, 120), budget=None) as s:\n"
              "    x = caliper_vk.empty((64, 3)); x.copy_(torch.randn(64, 3))\n"
              "    s.attach(x, view='pointcloud'); s.step()\n"
              "    print(s.save_png('attach.png'))\n")
    run_in(venv, tmp_path, python, "-c", attach)
    assert (tmp_path / "attach.png").stat().st_size > 0
    run_in(venv, tmp_path, caliper, "demo", "digits", "--headless", "--steps", "20", "--out", "digits")
    assert (tmp_path / "digits" / "final.png").is_file()
    run_in(venv, tmp_path, caliper, "view", "--png", "dashboard.png", "--size", "800x500")
    assert (tmp_path / "dashboard.png").stat().st_size > 0


def test_mypy_sees_the_installed_packages_api(venv, tmp_path):
    """mypy finds the installed wheel through py.typed and sees attach's signature."""
    from test_typing import check_mypy_report, mypy_user_script

    check_mypy_report(mypy_user_script(tmp_path, "--python-executable", str(_bin(venv, "python"))))
