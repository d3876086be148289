"""Layer guards: the engine never imports torch; it ships only as caliper_vk.engine."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_ENGINE = {"torch", "caliper_vk"}


def test_engine_sources_never_import_torch_or_the_package():
    for path in sorted((ROOT / "engine").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN_IN_ENGINE, f"{path.name} imports {name}"


def test_rendering_through_the_engine_loads_no_torch(tmp_path):
    code = (
        "import sys, numpy as np\n"
        "from caliper_vk.engine import Canvas, Buffer, default_device\n"
        "with Canvas(16, 16) as c: c.render()\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_engine_is_not_importable_as_a_top_level_package(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import engine"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode != 0
    assert "No module named 'engine'" in proc.stderr


def test_only_the_engine_calls_vulkan():
    for path in sorted((ROOT / "caliper_vk").rglob("*.py")):
        text = path.read_text()
        assert "import vulkan" not in text, path
        assert "vk.vkCmd" not in text, path
