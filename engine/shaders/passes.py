"""Compute passes: each pass's bindings declared once, by name.

A :class:`Pass` names its shader (the file stem: ``heatmap`` is ``heatmap.comp``), its
parameter block (a ``ParamBlock``) and its bindings in order. A view declares its passes at
the top level of its own module (``caliper_vk/views/heatmap.py``) and registers them
(:func:`declare`, called by ``register_view``); the common ones are here (:data:`COMMON`).
The build, which cannot import the views, reads their declarations from the files
(:func:`read_declarations`). From that one declaration

- the build writes ``<stem>_bindings.glsl`` into the generated include folder (with the
  parameter headers, :func:`caliper_vk.engine.shaders.generated_headers`): the block's header,
  then one ``layout(..., binding = k)`` line per binding. The shader includes it instead of
  declaring its bindings, so its binding numbers and kinds cannot drift from Python's;
- the views bind by name (``pipeline(device, "heatmap").bind(params=..., data=..., ...)``):
  :func:`caliper_vk.views._base.pipeline` makes the pipeline with these names and kinds, and
  a missing or unknown name is an error that lists the pass's bindings.

A binding's name is the GLSL variable the shader reads (``data``, ``stats``, ``target``);
the parameter block's binding is always ``params`` (read through ``P(k)`` / ``f(k)``).

Like ``params.py``, this module imports only the standard library (and ``params.py``):
``setup.py`` loads the shader package by path to build the shaders before the package exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

try:
    from . import params as _params
except ImportError:  # loaded by path (setup.py): load params.py beside this file by path too
    import importlib.util
    import sys

    _spec = importlib.util.spec_from_file_location(
        "_caliper_shader_params", Path(__file__).resolve().parent / "params.py")
    _params = sys.modules.get("_caliper_shader_params") or importlib.util.module_from_spec(_spec)
    if "_caliper_shader_params" not in sys.modules:
        sys.modules["_caliper_shader_params"] = _params
        _spec.loader.exec_module(_params)

ACCESS = ("", "readonly", "writeonly")


class Binding:
    """One binding of a pass: its name, its descriptor kind and how GLSL declares it.

    Use the constructors :func:`params`, :func:`buffer` and :func:`image`.
    """

    __slots__ = ("access", "element", "kind", "name", "note")

    def __init__(self, name: str, kind: str, element: str = "uint", access: str = "", note: str = ""):
        if kind not in ("uniform", "buffer", "image"):
            raise ValueError(f"binding {name!r}: kind {kind!r} is not 'uniform', 'buffer' or 'image'")
        if access not in ACCESS:
            raise ValueError(f"binding {name!r}: access {access!r} is not one of {ACCESS}")
        if not name.isidentifier():
            raise ValueError(f"binding {name!r} is not a GLSL identifier")
        self.name, self.kind, self.element, self.access, self.note = name, kind, element, access, note

    def glsl(self, k: int, block) -> str:
        """The ``layout(...)`` line that declares this binding as binding ``k``."""
        access = f"{self.access} " if self.access else ""
        note = f"  // {self.note}" if self.note else ""
        if self.name == "params":
            if block is None:
                raise ValueError("a pass without a parameter block has no 'params' binding")
            if block.layout == "buffer":
                return f"layout(std430, binding = {k}) {access}buffer Params {{ uint P[]; }};{note}"
            vectors = f"{{ uvec4 PV[{block.prefix}_VEC4S]; }};{note}"
            if self.kind == "uniform":
                return f"layout(std140, binding = {k}) uniform Params {vectors}"
            # a pass that writes its own parameters (the point cloud's fit) binds them as storage
            return f"layout(std430, binding = {k}) {access}buffer Params {vectors}"
        if self.kind == "image":
            return f"layout({self.element}, binding = {k}) uniform {access}uimage2D {self.name};{note}"
        struct = "".join(part.capitalize() for part in self.name.split("_"))
        return (f"layout(std430, binding = {k}) {access}buffer {struct} "
                f"{{ {self.element} {self.name}[]; }};{note}")

    def __repr__(self) -> str:
        return f"Binding({self.name!r}, {self.kind!r})"


def params(kind: str = "uniform", access: str = "") -> Binding:
    """The pass's parameter block: a uniform block (``"uniform"``, the default: one scalar load
    per invocation group on CPU implementations) or a storage buffer (``"buffer"``: a pass that
    writes parameters for the passes after it)."""
    return Binding("params", kind, access=access)


def buffer(name: str, element: str = "uint", access: str = "", note: str = "") -> Binding:
    """A storage buffer read as ``element name[]`` (``access``: ``""``, ``"readonly"`` or
    ``"writeonly"``)."""
    return Binding(name, "buffer", element, access, note)


def image(name: str = "target", access: str = "writeonly", fmt: str = "rgba8ui", note: str = "") -> Binding:
    """A storage image (the panel's canvas target by default), as ``uimage2D``."""
    return Binding(name, "image", fmt, access, note)


class Pass:
    """One compute pass of a built-in view: shader stem, parameter block, named bindings.

    Parameters
    ----------
    stem : str
        The shader's file stem (``engine/shaders/<stem>.comp``); it includes
        ``<stem>_bindings.glsl``.
    block : ParamBlock or None
        The parameter block behind the ``params`` binding (and the specialisation constants).
    bindings : sequence of Binding
        In binding order (binding 0 first).
    """

    def __init__(self, stem: str, block, bindings):
        self.stem, self.block = stem, block
        self.bindings: tuple[Binding, ...] = tuple(bindings)
        names = [b.name for b in self.bindings]
        if len(set(names)) != len(names):
            raise ValueError(f"pass {stem}: a binding name is declared twice: {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bindings)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(b.kind for b in self.bindings)

    @property
    def header_name(self) -> str:
        return f"{self.stem}_bindings.glsl"

    def header(self) -> str:
        """The GLSL the shader includes: its block's header and its binding declarations."""
        guard = f"{self.stem.upper()}_BINDINGS_GLSL"
        out = [f"// {self.header_name}: generated from the declaration of pass {self.stem!r}; do not edit.",
               f"#ifndef {guard}", f"#define {guard}"]
        if self.block is not None:
            out.append(f'#include "{self.block.name}.glsl"')
        out += [b.glsl(k, self.block) for k, b in enumerate(self.bindings)]
        out.append(f"#endif  // {guard}")
        return "\n".join(out) + "\n"

    def __repr__(self) -> str:
        return f"Pass({self.stem!r}, {', '.join(self.names)})"


def ro(name: str, element: str = "uint", note: str = "") -> Binding:
    """A read-only storage buffer (:func:`buffer` with ``access="readonly"``)."""
    return buffer(name, element, "readonly", note)


def wo(name: str, element: str = "uint", note: str = "") -> Binding:
    """A write-only storage buffer."""
    return buffer(name, element, "writeonly", note)


# -- the common passes (shared by several views) and the registry -----------------------------------

# The value-range resolve (shared by the ranged views: heatmap, histogram, curve, textgrid, images,
# confusion, and the point cloud's values).
RANGE_RESOLVE = Pass("range_resolve", _params.RANGE, [params(), buffer("stats")])
COMMON = (RANGE_RESOLVE,)

PASSES: dict[str, Pass] = {p.stem: p for p in COMMON}
"""Every declared pass by stem: the common ones above, and each view's, added by :func:`declare`
when the view registers (``caliper_vk/views/_registry.py``) or when the build reads the view's
module (:mod:`.declared`)."""


def declare(*declared: Pass) -> None:
    """Add passes to :data:`PASSES`. A stem declared again must declare the same bindings and block
    (a module imported twice, or read by the build and then imported); two different passes for one
    shader are an error that names both."""
    for p in declared:
        if not isinstance(p, Pass):
            raise TypeError(f"declare() takes Pass objects, got {p!r}")
        known = PASSES.get(p.stem)
        if known is not None and known is not p and _text(known) != _text(p):
            raise ValueError(f"pass {p.stem!r} is declared twice, differently: {known!r} "
                             f"({known.block!r}) and {p!r} ({p.block!r})")
        PASSES[p.stem] = p


def _text(p: Pass) -> str:
    return p.header() + (p.block.header() if p.block is not None else "")


def blocks() -> dict[str, object]:
    """Every parameter block a declared pass reads, and the common blocks, by name (their headers
    are generated beside the passes'). Two different blocks under one name are an error."""
    found: dict[str, object] = {}
    for block in (*_params.COMMON, *(p.block for p in PASSES.values() if p.block is not None)):
        known = found.setdefault(block.name, block)
        if known is not block and known.header() != block.header():
            raise ValueError(f"two different parameter blocks are named {block.name!r}")
    return found


def get(stem: str) -> Pass:
    """The declared pass ``stem``; an unknown one is a KeyError that lists them."""
    try:
        return PASSES[stem]
    except KeyError:
        raise KeyError(f"no pass {stem!r} is declared (a view declares its passes in its module, "
                       f"engine/shaders/passes.py the common ones); declared: "
                       f"{', '.join(sorted(PASSES))}") from None


# -- reading a view's declarations without importing it ------------------------------------------------
# The build (setup.py) generates the shaders' headers before the package, and Vulkan, can be imported,
# so it cannot import the view modules that declare the passes. It reads them: the top-level
# statements of a module that import the machinery (from ...engine.shaders.params / .passes) or
# assign a declaration (a ParamBlock(...) or Pass(...) call, or a tuple or list of them) are run,
# alone, in a namespace holding only the machinery and the common blocks. Imported, the module runs
# the very same statements, so the headers and the Python agree by construction.

MACHINERY = ("ParamBlock", "Pass", "Binding", "params", "buffer", "image", "ro", "wo")


class DeclarationError(ValueError):
    """A view's declaration the build cannot read: names the file, the line and the rule."""


def _declaration_call(node, callables) -> bool:
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_declaration_call(e, callables) for e in node.elts)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and callables.get(node.func.id) in ("ParamBlock", "Pass"))


def read_declarations(path) -> list[Pass]:
    """The passes a Python module declares at its top level (in order), read without importing it
    (see the comment above); a declaration that uses a name the build cannot see is a
    :class:`DeclarationError` naming the file and line."""
    path = Path(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    sources = {"params": vars(_params), "passes": globals()}  # what importing from each would give
    namespace: dict = {"__builtins__": {}}
    callables: dict[str, str] = {}  # a local name -> the machinery callable it is
    found: list[Pass] = []
    for node in tree.body:
        origin = (node.module or "").rsplit(".", 1)[-1] if isinstance(node, ast.ImportFrom) else ""
        if origin in sources and node.module.endswith(f"engine.shaders.{origin}"):
            names = sources[origin]
            for alias in node.names:
                if alias.name in names:
                    namespace[alias.asname or alias.name] = names[alias.name]
                    if alias.name in ("ParamBlock", "Pass"):
                        callables[alias.asname or alias.name] = alias.name
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) else None)
        if not isinstance(target, ast.Name) or not _declaration_call(node.value, callables):
            continue
        code = compile(ast.Module([node], []), str(path), "exec")
        try:
            exec(code, namespace)
        except NameError as e:
            raise DeclarationError(
                f"{path}:{node.lineno}: the declaration of {target.id} uses {e.name!r}, which the build "
                "cannot see without importing the module: a declaration may use literals, the machinery "
                f"({', '.join(MACHINERY)}), the common blocks (engine/shaders/params.py) and the "
                "declarations before it in the same module") from None
        value = namespace[target.id]
        found += [v for v in (value if isinstance(value, (tuple, list)) else (value,)) if isinstance(v, Pass)]
    return found
