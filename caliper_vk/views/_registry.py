"""The view registry: a built-in view registers itself, beside its class, as one unit.

::

    HEATMAP = ParamBlock("heatmap_params", "HM", [...])          # its parameter block
    STATS_PASS = Pass("heatmap_stats", HEATMAP, [params(), ro("data"), buffer("stats")])
    HEATMAP_PASS = Pass("heatmap", HEATMAP, [params(), ro("data"), ..., image()])

    @register_view("heatmap", block=HEATMAP, passes=(STATS_PASS, "range_resolve", HEATMAP_PASS),
                   inputs=("data",), tests=("tests/test_heatmap_exact.py",))
    class Heatmap(RangedView): ...

The block and the passes are declared at the top level of the view's own module, where the build
reads them without importing it (engine/shaders/passes.py: ``read_declarations``) to generate the
headers its shaders include; registering declares the same passes for Python
(``passes.declare``), so both sides get them from one text.

A :class:`ViewSpec` holds what the rest of Caliper asks about a view, so nothing else keeps a
list of views:

- ``block``: its parameter block (a ``ParamBlock`` declared in its module), set by field name
  (``HEATMAP.values(rows=..., cols=...)``);
- ``passes``: its compute passes in order: the ``Pass`` objects it declares (its shader stem,
  block and named bindings; the GLSL binding lines are generated from that declaration, and
  :func:`caliper_vk.views._base.pipeline` binds by the same names) or the stems of passes
  declared already (``"range_resolve"``, common: engine/shaders/passes.py; ``"heatmap_stats"``,
  the heatmap's);
- ``inputs``: its named inputs (the constructor's array arguments: ``data``, or
  ``positions``, ``labels`` and ``values``); the first one is required;
- ``tests``: the test files that check its bytes against its numpy twin; ``tools/test`` runs
  them under every device profile (:func:`profile_tests`);
- ``cli``: whether ``caliper render --view NAME`` draws it from an array file;
- ``sample``: what the self-test (``caliper doctor --selftest``) draws it from: a
  :class:`Sample`, either a random tensor's shape (drawn through each import path, as the
  hardware tests do: :data:`caliper_vk.selftest.TENSOR_VIEWS`) or fixed host ``values``.

``make_view``, ``attach(view=...)``, the CLI's ``--view`` and the profile runs all read
:data:`VIEWS` / :data:`SPECS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.shaders import passes as _passes


@dataclass(frozen=True)
class Sample:
    """What the self-test draws a view from (see the module docstring)."""

    shape: tuple[int, ...]  # a random tensor's (empty with ``values``)
    size: tuple[int, int]  # the canvas (width, height)
    nan_every: int = 0  # a NaN every this many elements of a float sample (0: none)
    values: object = None  # fixed host input instead: a string (the view's text) or int32 rows


@dataclass(frozen=True)
class ViewSpec:
    """One registered view (see the module docstring)."""

    name: str
    cls: type
    block: object
    passes: tuple
    inputs: tuple[str, ...]
    tests: tuple[str, ...]
    profile_skip: tuple[str, ...] = ()
    cli: bool = False
    sample: Sample | None = None

    @property
    def bindings(self) -> dict[str, tuple[str, ...]]:
        """Each pass's binding names, in binding order (from its ``Pass`` declaration)."""
        return {p.stem: p.names for p in self.passes}


SPECS: dict[str, ViewSpec] = {}
VIEWS: dict[str, type] = {}  # name -> view class (what make_view constructs)


def register_view(name: str, *, block=None, passes=(), inputs=("data",), tests=(), profile_skip=(),
                  cli: bool = False, sample: Sample | None = None):
    """Class decorator: register the view class under ``name`` (see the module docstring).

    ``passes`` are :class:`~caliper_vk.engine.shaders.passes.Pass` objects, which the view
    declares (in its module, where the build reads them), or the stems of passes declared
    already (a common one, or another view's); a name registered twice is an error (two views
    would answer to one ``view=``)."""
    own = [p for p in passes if isinstance(p, _passes.Pass)]
    _passes.declare(*own)
    # an unknown stem raises, listing the declared ones
    declared = tuple(p if isinstance(p, _passes.Pass) else _passes.get(p) for p in passes)
    bad = [t for t in (*tests, *profile_skip) if not t.startswith("tests/")]
    if bad:
        raise ValueError(f"view {name!r}: test paths are relative to the repository root "
                         f"(tests/...): {bad}")

    def decorate(cls):
        if name in SPECS and SPECS[name].cls.__qualname__ != cls.__qualname__:
            raise ValueError(f"view {name!r} is registered twice: {SPECS[name].cls.__name__} and "
                             f"{cls.__name__}")
        spec = ViewSpec(name, cls, block, declared, tuple(inputs), tuple(tests), tuple(profile_skip), cli,
                        sample)
        SPECS[name] = spec
        VIEWS[name] = cls
        cls.view_spec = spec
        return cls

    return decorate


def profile_tests() -> list[str]:
    """The pytest arguments that run every registered view's byte-exact tests (each file once,
    in registration order) with their ``profile_skip`` deselected: what ``tools/test`` runs
    under each device profile, besides the attach, sync and demo tests it names itself."""
    files = list(dict.fromkeys(t for spec in SPECS.values() for t in spec.tests))
    skips = list(dict.fromkeys(t for spec in SPECS.values() for t in spec.profile_skip))
    return [*files, *(a for t in skips for a in ("--deselect", t))]
