"""User shader modules: GLSL functions composed with built-in modules into a panel.

A :class:`ShaderModule` is GLSL text written by the user — a colour mapping
``vec4 color(float v, uint i)`` or a whole raster function
``uvec4 shade(uvec2 px, uvec2 size)``. :func:`compose` turns it into one
compute shader, as text, from built-in pieces:

1. ``common.glsl`` (the exact-path helpers: ``ftz``, ``classify``, ...);
2. a generated parameter block (storage buffer, binding 0): the panel frame
   (size, placement, background, value range), each input's byte offset,
   dtype, length and 2-D shape, then the user's scalar parameters as named
   ``float`` / ``int`` / ``uint`` members, so the user writes ``gain``;
3. one storage buffer per input (bindings 1..n), each decoded from its own
   dtype by ``input.glsl`` (included once per input with its names renamed by
   macros), with generated accessors ``a_at(i)``, ``a_at(row, col)``,
   ``a_len()``, ``a_rows()``, ``a_cols()``;
4. ``custom_frame.glsl`` (byte conversion, ``to_unit``, cell indexing);
5. the user's module, after ``#line 1 "<its file>"``
   (``GL_GOOGLE_cpp_style_line_directive``), so the compiler's diagnostics
   name the user's file and line;
6. ``custom_main.glsl``, the entry point for the panel's mode.

Before compiling, :func:`check_entry` makes sure the module defines the
function its mode calls with the right signature; a missing or mistyped
function gets a :class:`ShaderSignatureError` naming the expected signature.
Compilation goes through :func:`caliper_vk.engine.shaders.compile_glsl` (a GLSL
compiler on PATH; SPIR-V cached on disk by a hash of the composed text, which
includes every built-in piece, so editing one invalidates the cache).
Compiler output is translated into a :class:`ShaderCompileError` carrying the
user's file, line and message.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .engine import shaders
from .engine.shaders.params import ParamBlock

SHADER_DIR = Path(shaders.__file__).resolve().parent
LOCAL_SIZE = 16  # the entry point's workgroup is LOCAL_SIZE x LOCAL_SIZE pixels
USER_FILE = "cv-user-module"  # the user's file in the compiled text; diagnostics get the real name


class ShaderError(Exception):
    """A user shader module cannot be used; the message says where and what to change."""

    @property
    def summary(self) -> str:
        """One line for a status bar."""
        return str(self).splitlines()[0] if str(self) else type(self).__name__


class ShaderSignatureError(ShaderError, ValueError):
    """The module lacks the function its panel calls, or declares it with another signature."""


class ShaderCompileError(ShaderError, shaders.ShaderCompileError):
    """The composed shader did not compile. ``file``, ``line`` and ``message`` locate the first
    error in the user's module (``line`` is None when the compiler blamed Caliper's own code)."""

    def __init__(self, text: str, file: str, line: int | None, message: str, diagnostics: str):
        super().__init__(text)
        self.file, self.line, self.message, self.diagnostics = file, line, message, diagnostics

    @property
    def summary(self) -> str:
        """One line for a status bar: ``file:line: message``."""
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


@dataclass(frozen=True)
class Signature:
    """A function a panel mode calls: its return type, name and parameters."""

    returns: str
    name: str
    params: tuple[tuple[str, str], ...]  # (type, name)
    meaning: str

    def __str__(self) -> str:
        args = ", ".join(f"{t} {n}" for t, n in self.params)
        return f"{self.returns} {self.name}({args})"


COLOR = Signature("vec4", "color", (("float", "v"), ("uint", "i")),
                  "v: the element's value decoded to float32; i: its flat index; return RGBA in [0, 1]")
RASTER = Signature("uvec4", "shade", (("uvec2", "px"), ("uvec2", "size")),
                   "px: the pixel in the panel, origin top-left; size: the panel's width and height; "
                   "return RGBA bytes 0..255")
ENTRIES = {"color": COLOR, "raster": RASTER}


@dataclass(frozen=True)
class FunctionDef:
    """A function definition found in a module (types only; qualifiers dropped)."""

    returns: str
    name: str
    param_types: tuple[str, ...]
    line: int
    text: str  # the definition's head as written, for messages
    start: int  # offset of the return type in the source


_QUALIFIERS = {"in", "const", "highp", "mediump", "lowp", "precise", "out", "inout"}
_NOT_NAMES = {"if", "for", "while", "switch", "return", "else", "do"}
_DEF = re.compile(r"\b([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*\(([^()]*)\)\s*\{")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_VERSION = re.compile(r"^[ \t]*#[ \t]*version\b[^\n]*", re.M)


def _blank_comments(source: str) -> str:
    """``source`` with comments replaced by spaces (newlines kept), so offsets still match."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


class ShaderModule:
    """GLSL text written by the user, to be composed into a panel's compute shader.

    Parameters
    ----------
    source : str
        GLSL function definitions (no ``#version``, no ``main``; a ``#version``
        line is ignored). What the module must define depends on where it is
        used: ``CustomPanel(color=...)`` calls ``vec4 color(float v, uint i)``,
        ``CustomPanel(raster=...)`` calls ``uvec4 shade(uvec2 px, uvec2 size)``.
    name : str, optional
        The file name diagnostics use. Defaults to the file and line of the
        Python code that made the module (``<ShaderModule at train.py:41>``).

    Examples
    --------
    >>> colour = ShaderModule.from_file("my_colour.glsl")    # doctest: +SKIP
    >>> ramp = ShaderModule('''
    ... vec4 color(float v, uint i) { float t = to_unit(v); return vec4(t, t, 1.0 - t, 1.0); }
    ... ''')
    """

    def __init__(self, source: str, name: str | None = None):
        if not isinstance(source, str):
            raise TypeError(f"ShaderModule takes GLSL text (str), got {type(source).__name__}; "
                            "use ShaderModule.from_file(path) for a file")
        self.source = source
        self.name = name or _caller_name()
        self.path: Path | None = None

    @classmethod
    def from_file(cls, path) -> ShaderModule:
        """The module in file ``path``; diagnostics name the path as given."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")  # GLSL is UTF-8 whatever the locale (Windows: cp1252)
        except FileNotFoundError:
            raise FileNotFoundError(f"shader module {str(path)!r} does not exist "
                                    f"(looked in {p.resolve().parent})") from None
        module = cls(text, name=str(path))
        module.path = p
        return module

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def functions(self) -> list[FunctionDef]:
        """Every function definition in the module, in order."""
        text = _blank_comments(self.source)
        found = []
        for m in _DEF.finditer(text):
            returns, name, params = m.group(1), m.group(2), m.group(3)
            if name in _NOT_NAMES or returns in _NOT_NAMES or returns in _QUALIFIERS:
                continue
            types = []
            for p in (p.strip() for p in params.split(",")):
                words = [w for w in p.split() if w not in _QUALIFIERS]
                if words and words != ["void"]:
                    types.append(words[0])
            head = " ".join(self.source[m.start(): m.end() - 1].split())
            found.append(FunctionDef(returns, name, tuple(types), text.count("\n", 0, m.start()) + 1,
                                     head, m.start()))
        return found

    def source_line(self, line: int) -> str:
        lines = self.source.splitlines()
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def __repr__(self) -> str:
        return f"ShaderModule({self.name!r}, {len(self.source)} chars)"


def _caller_name() -> str:
    """``<ShaderModule at file.py:line>`` for the first caller outside caliper_vk."""
    here = Path(__file__).resolve().parent
    frame = sys._getframe(1)
    while frame is not None and Path(frame.f_code.co_filename).resolve().is_relative_to(here):
        frame = frame.f_back
    if frame is None:
        return "<ShaderModule>"
    return f"<ShaderModule at {Path(frame.f_code.co_filename).name}:{frame.f_lineno}>"


def check_entry(module: ShaderModule, mode: str) -> FunctionDef:
    """The definition of the function ``mode`` calls; a clear error when it is missing or
    declared with another signature."""
    want = ENTRIES[mode]
    defs = module.functions()
    for d in defs:
        if d.name == "main":
            raise ShaderSignatureError(
                f"{module.name}:{d.line}: the module defines main(); the panel writes main() itself. "
                f"Define the function it calls instead:\n    {want}\n({want.meaning})")
    same = [d for d in defs if d.name == want.name]
    for d in same:
        if d.returns == want.returns and d.param_types == tuple(t for t, _ in want.params):
            return d
    if same:
        d = same[0]
        raise ShaderSignatureError(
            f"{module.name}:{d.line}: {want.name}() is defined as '{d.text}'; "
            f"CustomPanel({mode}=...) calls\n    {want}\n({want.meaning})")
    others = ", ".join(f"{d.name}()" for d in defs) or "no functions"
    raise ShaderSignatureError(
        f"{module.name} defines no function {want.name}(); CustomPanel({mode}=...) calls\n"
        f"    {want}\n({want.meaning}). The module defines {others}.")


# -- names the user may give inputs and parameters ---------------------------------------------
GLSL_WORDS = set("""
attribute const uniform varying buffer shared coherent volatile restrict readonly writeonly layout
centroid flat smooth noperspective patch sample break continue do for while switch case default if
else subroutine in out inout float double int void bool true false invariant precise discard return
mat2 mat3 mat4 dmat2 dmat3 dmat4 vec2 vec3 vec4 ivec2 ivec3 ivec4 bvec2 bvec3 bvec4 dvec2 dvec3 dvec4
uint uvec2 uvec3 uvec4 lowp mediump highp precision sampler2D image2D uimage2D struct
main color shade input output common filter cast namespace using sizeof
""".split())
HELPERS = {"classify", "ftz", "orderable", "from_orderable", "lut_index", "unpack_rgba", "shade_rgba",
           "linear_invocation", "half_bits_to_float", "load_input", "to_unit", "range_lo",
           "range_scale", "INPUT"}
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def check_name(name: str, what: str) -> None:
    """Refuse a name that is not a plain GLSL identifier or would clash with Caliper's."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"{what} name {name!r} is not a GLSL identifier (letters, digits, _; "
                         "starting with a letter)")
    if name in GLSL_WORDS or name in HELPERS or name.startswith(("cv_", "gl_", "CV_", "DT_")) \
            or "__" in name:
        raise ValueError(f"{what} name {name!r} is reserved (a GLSL word, a Caliper helper, or a "
                         "cv_/gl_/DT_ prefix); choose another name")


def input_functions(name: str) -> tuple[str, ...]:
    """The GLSL accessors generated for input ``name``."""
    return (f"{name}_at", f"{name}_len", f"{name}_rows", f"{name}_cols")


# -- composition ----------------------------------------------------------------------------------
def _block(name: str) -> str:
    return (SHADER_DIR / name).read_text(encoding="utf-8")


# The block every custom panel's parameters start with, then each input's fields, then the
# user's parameters: one ParamBlock (engine/shaders/params.py), the class that declares the
# built-in views' blocks too, read by name in the shader and packed by it on the host.
FRAME_FIELDS = (("cv_width", "uint"), ("cv_height", "uint"), ("cv_rect_x", "uint"), ("cv_rect_y", "uint"),
                ("cv_background", "uint"), ("range_lo", "float"), ("range_scale", "float"))
INPUT_FIELDS = ("base", "dtype", "len", "rows", "cols")


def param_block(inputs, params) -> ParamBlock:
    """The panel's parameter block: the frame, each input's fields, then the user's scalar
    parameters ``(name, kind)``; one uint, int or float word each."""
    fields = list(FRAME_FIELDS)
    for name in inputs:
        fields += [(f"cv_{name}_{k}", "uint") for k in INPUT_FIELDS]
    fields += [(name, kind) for name, kind in params]
    return ParamBlock("custom_panel_params", "CP", fields, layout="buffer")


@dataclass(frozen=True)
class Composition:
    """A composed compute shader: its text and the resources its bindings expect.

    ``canonical`` names the user's module :data:`USER_FILE` in its ``#line``
    directive, so the compiled SPIR-V (which carries no file names) is cached
    by content alone: the same function from a file or a string compiles once.
    """

    canonical: str
    mode: str
    inputs: tuple[str, ...]
    block: ParamBlock
    module: ShaderModule

    @property
    def bindings(self) -> list[str]:
        """Binding kinds for :class:`~caliper_vk.engine.ComputePipeline`: params, inputs, target."""
        return ["buffer"] * (1 + len(self.inputs)) + ["image"]

    @property
    def text(self) -> str:
        """The composed source, naming the user's file as diagnostics do."""
        return self.canonical.replace(f'#line 1 "{USER_FILE}"\n', f'#line 1 "{self.module.name}"\n', 1)

    @property
    def key(self) -> str:
        return hashlib.sha256(self.canonical.encode()).hexdigest()[:32]


def compose(module: ShaderModule, mode: str, inputs=(), params=()) -> Composition:
    """Compose ``module`` into a whole compute shader for a panel in ``mode``.

    Parameters
    ----------
    module : ShaderModule
    mode : ``"color"`` or ``"raster"``
    inputs : sequence of str
        Input names (``"color"`` takes exactly one).
    params : sequence of (name, type)
        Scalar parameters; type ``"float"``, ``"int"`` or ``"uint"``.
    """
    if mode not in ENTRIES:
        raise ValueError(f"unknown custom panel mode {mode!r}; use 'color' or 'raster'")
    inputs = tuple(inputs)
    params = tuple(params)
    if mode == "color" and len(inputs) != 1:
        raise ValueError(f"a color panel draws exactly one input, got {len(inputs)}: {inputs}")
    entry = check_entry(module, mode)
    block = param_block(inputs, params)
    out = ["#version 450",
           "#extension GL_GOOGLE_cpp_style_line_directive : require",
           "#extension GL_ARB_gpu_shader_int64 : require",
           f"// A Caliper custom panel ({mode}), composed by caliper_vk/shader_module.py.",
           f"layout(local_size_x = {LOCAL_SIZE}, local_size_y = {LOCAL_SIZE}) in;",
           '#line 1 "common.glsl"', _block("common.glsl"),
           '#line 1 "caliper: parameter block"',
           "layout(std430, binding = 0) readonly buffer CvParams {"]
    out += block.members()
    out.append("};")
    for k, name in enumerate(inputs):
        out.append(f"layout(std430, binding = {k + 1}) readonly buffer CvInput_{name} "
                   f"{{ uint cv_in_{name}[]; }};")
    out.append(f"layout(rgba8ui, binding = {len(inputs) + 1}) uniform writeonly uimage2D cv_target;")
    out += ['#line 1 "custom_frame.glsl"', _block("custom_frame.glsl")]
    for name in inputs:
        out += [f"#define INPUT cv_in_{name}", f"#define load_input cv_load_{name}",
                f"#define half_bits_to_float cv_half_bits_to_float_{name}",
                '#line 1 "input.glsl"', _block("input.glsl"),
                "#undef INPUT", "#undef load_input", "#undef half_bits_to_float",
                f'#line 1 "caliper: input {name}"',
                f"float {name}_at(uint i) {{ return cv_load_{name}(cv_{name}_base, cv_{name}_dtype, i); }}",
                f"float {name}_at(uint row, uint col) {{ return {name}_at(row * cv_{name}_cols + col); }}",
                f"uint {name}_len() {{ return cv_{name}_len; }}",
                f"uint {name}_rows() {{ return cv_{name}_rows; }}",
                f"uint {name}_cols() {{ return cv_{name}_cols; }}"]
    out += [f'#line 1 "{USER_FILE}"', _user_text(module, entry)]
    if mode == "color":
        data = inputs[0]
        out += ["#define CV_COLOR_MODE", f"#define CV_DATA_AT {data}_at",
                f"#define CV_DATA_ROWS {data}_rows", f"#define CV_DATA_COLS {data}_cols"]
    out += ['#line 1 "custom_main.glsl"', _block("custom_main.glsl")]
    return Composition("\n".join(out) + "\n", mode, inputs, block, module)


def _user_text(module: ShaderModule, entry: FunctionDef) -> str:
    """The module as composed: ``#version`` blanked (the panel supplies it) and the entry
    function's result made ``precise``, so the float operations that produce it keep their
    order and are never fused (SPIR-V NoContraction; docs/determinism.md rule 2)."""
    text = module.source
    head = _blank_comments(text)[:entry.start]
    if not re.search(r"\bprecise\s*$", head):
        text = text[:entry.start] + "precise " + text[entry.start:]
    return _VERSION.sub("", text)


# -- compiling ------------------------------------------------------------------------------------
_DIAG = re.compile(r"^(?:ERROR: |WARNING: )?(.*?):(\d+): (?:(error|warning): )?(.*)$")


def compile_composition(comp: Composition) -> bytes:
    """SPIR-V for a composition (cached by source hash); compiler errors become a
    :class:`ShaderCompileError` that names the user's file and line."""
    try:
        return shaders.compile_glsl(comp.canonical, name="custom_panel.comp")
    except ShaderError:
        raise
    except shaders.ShaderCompileError as exc:
        output = str(exc).replace(f"{USER_FILE}:", f"{comp.module.name}:")
        raise translate_errors(output, comp.module) from None


def translate_errors(output: str, module: ShaderModule) -> ShaderCompileError:
    """Turn compiler output about a composed shader into an error about the user's module."""
    lines = output.splitlines()
    if lines and lines[0].startswith(("compiling ", "spirv-val")):
        lines = lines[1:]
    diagnostics = "\n".join(lines).strip()
    prefix = module.name + ":"
    for raw in lines:
        text = raw.removeprefix("ERROR: ")
        m = re.match(r"(\d+): (?:(error|warning): )?(.*)$", text[len(prefix):]) \
            if text.startswith(prefix) else None
        if m is None or m.group(2) == "warning":
            continue
        line, message = int(m.group(1)), m.group(3).strip()
        body = (f"{module.name}:{line}: error: {message}\n"
                f"  {line:4d} | {module.source_line(line)}\n"
                f"(the custom panel was not built; fix {module.name} and build it again)")
        if len([d for d in lines if _DIAG.match(d)]) > 1:
            body += "\nall compiler messages:\n" + diagnostics
        return ShaderCompileError(body, module.name, line, message, diagnostics)
    m = next((m for m in map(_DIAG.match, lines) if m and m.group(3) != "warning"), None)
    where = f"{m.group(1)}:{m.group(2)}" if m else "the composed shader"
    message = m.group(4).strip() if m else "compilation failed"
    body = (f"{module.name}: the panel's shader failed to compile in Caliper's own code ({where}: "
            f"{message}); most often a name in {module.name} clashes with a helper, a parameter or "
            f"an input accessor.\nall compiler messages:\n{diagnostics}")
    return ShaderCompileError(body, module.name, None, f"{where}: {message}", diagnostics)
