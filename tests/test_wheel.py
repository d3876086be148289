"""An installed wheel works on its own: compiled shaders inside, no source tree needed."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
         str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (whl,) = out.glob("caliper_vk-*.whl")
    return whl


def test_wheel_ships_spirv_and_no_top_level_engine(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    spv = [n for n in names if n.endswith(".spv")]
    assert {Path(n).stem for n in spv} >= {"pointcloud_splat", "pointcloud_resolve", "heatmap",
                                           "heatmap_stats", "overlay_vs", "overlay_fs", "textgrid"}
    assert all(n.startswith("caliper_vk/engine/shaders/spv/") for n in spv)
    assert "caliper_vk/assets/glyphs.npz" in names  # the baked glyph atlas
    assert "caliper_vk/assets/colormaps.npz" in names  # the baked colour tables
    assert "caliper_vk/web/page.html" in names  # the page of Session(window="web") and caliper view --web
    assert not any(n.startswith("engine/") for n in names)


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
    import json

    names = set(zipfile.ZipFile(wheel).namelist())
    runs = sorted((ROOT / "caliper_vk" / "runs" / "examples").glob("*/run.json"))
    assert len(runs) >= 8
    for path in runs:
        rel = path.relative_to(ROOT).as_posix()
        assert rel in names
        data = json.loads(path.read_text()).get("data")  # caliper-run/2: the arrays' sidecar
        if data:
            assert f"{rel.rsplit('/', 1)[0]}/{data['file']}" in names, rel
