"""Layer guards: the layering rules docs/architecture.md states, checked on every import —
absolute or relative, at module level or inside a function — and the engine ships only as
caliper_vk.engine."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = "caliper_vk"

# layer -> module prefixes it must never import (docs/architecture.md, "Layers")
RULES = {
    "engine": ("torch", PKG),  # except caliper_vk.engine itself, see imports()
    "exporters": (f"{PKG}.views", f"{PKG}.live"),
    "views": (f"{PKG}.live", f"{PKG}.exporters"),
    # live may import engine, exporters, views, record and the shared top-level helpers
    "live": (f"{PKG}.dashboard", f"{PKG}.demos", f"{PKG}.runs", f"{PKG}.api", f"{PKG}.cli"),
}


def package_of(path: Path) -> str:
    """The dotted package a source file belongs to, as installed (engine/ is caliper_vk.engine)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "engine":
        parts = [PKG, *parts]
    return ".".join(parts[:-1])  # a module's package; an __init__'s is the package itself


def imports(path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved to absolute names."""
    tree = ast.parse(path.read_text(), str(path))
    package = package_of(path)
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from . import x` may import submodule x: check both the package and package.x
            names += [module] + [f"{module}.{a.name}" for a in node.names]
    return names


def layer_files(layer: str) -> list[Path]:
    folder = ROOT / "engine" if layer == "engine" else ROOT / PKG / layer
    return sorted(folder.rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layers_import_only_what_the_architecture_allows(layer):
    files = layer_files(layer)
    assert files, f"no sources found for layer {layer}"
    for path in files:
        for name in imports(path):
            if layer == "engine" and (name == f"{PKG}.engine" or name.startswith(f"{PKG}.engine.")):
                continue
            for banned in RULES[layer]:
                assert not (name == banned or name.startswith(banned + ".")), \
                    f"{path.relative_to(ROOT)} imports {name} ({layer} must not import {banned})"


def test_relative_imports_are_resolved():
    """The checker sees through relative imports (a guard that cannot fail guards nothing)."""
    assert f"{PKG}.views" in imports(ROOT / PKG / "live" / "session.py")
    assert f"{PKG}.exporters.contract" in imports(ROOT / PKG / "exporters" / "cpu.py")
    assert f"{PKG}.engine._vk" in imports(ROOT / "engine" / "sync.py")


def test_the_data_path_reads_in_folder_names():
    """tensor → exporter → live input → view → canvas → window."""
    for part in (PKG + "/exporters", PKG + "/live", PKG + "/views", "engine/canvas.py", "engine/window.py"):
        assert (ROOT / part).exists(), part
    assert not (ROOT / PKG / "session.py").exists(), "the live session lives in caliper_vk/live/"


@pytest.mark.parametrize("folder", [PKG, "engine"])
def test_no_module_over_500_lines(folder):
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / folder).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}, f"modules over 500 lines: {long}"


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


def test_every_package_is_listed_for_the_wheel():
    """A package missing from pyproject's list installs fine editable and is absent from a wheel."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {package_of(init) for top in (PKG, "engine") for init in (ROOT / top).rglob("__init__.py")
             if "gen" not in init.parts}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


# `session._name` reached from another module of caliper_vk/live -> why it must stay. Empty: the
# helpers use session.frame and the calls caliper_vk/live/frame_state.py's LoopHost names.
SESSION_REACH_INS: dict[tuple[str, str], str] = {}


def session_reach_ins(source: str) -> list[tuple[int, str]]:
    """(line, name) of every private attribute read or written on a session: ``session._x``,
    ``self.session._x`` (any ``<...>.session._x``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id == "session") or (
                isinstance(owner, ast.Attribute) and owner.attr == "session"):
            found.append((node.lineno, node.attr))
    return sorted(found)


def test_the_live_helpers_never_reach_into_the_sessions_privates():
    """The Session owns the frame loop; its helpers touch it only through .frame_state."""
    live = ROOT / PKG / "live"
    for path in sorted(live.rglob("*.py")):
        if path == live / "session.py":
            continue
        rel = str(path.relative_to(ROOT))
        for line, name in session_reach_ins(path.read_text()):
            assert (rel, name) in SESSION_REACH_INS, \
                f"{rel}:{line} reaches into session.{name}: use session.frame or a call LoopHost names " \
                "(caliper_vk/live/frame_state.py)"


def test_the_reach_in_guard_sees_reads_writes_and_panel_sessions():
    """A guard that cannot fail guards nothing."""
    code = "session._inflight = True\nx = self.session._detach(p)\ny = session.frame.inflight\n"
    assert session_reach_ins(code) == [(1, "_inflight"), (2, "_detach")]


def test_the_session_has_every_call_its_helpers_may_make():
    from caliper_vk.live import Session
    from caliper_vk.live.frame_state import LoopHost

    for name in ("wait_idle", "collect", "relayout", "fault", "detach"):
        assert name in vars(LoopHost), name
        assert callable(getattr(Session, name, None)), f"Session.{name} (LoopHost) is missing"
