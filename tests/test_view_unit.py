"""Adding a view is its module, its shader and its test: a view made of two files in a temporary
folder goes through the build's reading of its declarations and the registration, and draws
byte-exact against its twin; the build reads every built-in view's declarations, without importing
anything, as the import makes them; and no other file keeps a list of views."""

import ast
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from caliper_vk.engine import shaders
from caliper_vk.engine.shaders import params, passes
from caliper_vk.views import SPECS, VIEWS, profile_tests
from images import assert_view_matches_twin

ROOT = Path(__file__).resolve().parent.parent

# A made-up view: each panel column shows one element (column x: element x * n // w) as a grey
# level, float32 value times GAIN clamped to 0..255 and truncated, on every row.
SPARK_MODULE = '''
import numpy as np

from caliper_vk.engine.shaders.params import ParamBlock
from caliper_vk.engine.shaders.passes import Pass, image, params, ro
from caliper_vk.views import _exact, register_view
from caliper_vk.views._base import ViewBase, pipeline

SPARK = ParamBlock("spark_params", "SP", ["N", "W", "H", "RECT_X", "RECT_Y", ("GAIN", "float")])
SPARK_PASS = Pass("spark", SPARK, [params(), ro("data", "float"), image()])


@register_view("spark", block=SPARK, passes=(SPARK_PASS,), inputs=("data",),
               tests=("tests/test_view_unit.py",))
class Spark(ViewBase):
    def __init__(self, data=None, *, gain=64.0):
        super().__init__()
        self.values, self.gain = np.asarray(data, np.float32).ravel(), gain

    def params(self, width, height, rect_x=0, rect_y=0):
        return SPARK.values(n=self.values.size, w=width, h=height, rect_x=rect_x, rect_y=rect_y,
                            gain=self.gain)

    def prepare(self):
        r = self.rect
        self._upload("params", self.params(r.width, r.height, r.x, r.y))
        self._upload("data", self.values)
        self._dirty.clear()

    def record_reads(self, rec):
        b = self._buffers
        self._drop_sets()
        draw = pipeline(self.device, "spark").bind(params=b["params"], data=b["data"], target=self.target)
        self._sets = [draw]
        rec.dispatch(draw, -(-self.rect.width // 16), -(-self.rect.height // 16))

    def record(self, rec):
        self.stale = False

    def finish(self):
        self.stats = {"n": int(self.values.size)}

    def reference_with_stats(self, width, height):
        cols = (np.arange(width, dtype=np.int64) * self.values.size) // width
        level = np.minimum(np.maximum(self.values[cols] * np.float32(self.gain), np.float32(0)),
                           np.float32(255)).astype(np.uint32)
        rgba = np.broadcast_to(level * 0x010101 | np.uint32(0xFF000000), (height, width))
        return _exact.unpack_rgba(np.ascontiguousarray(rgba)), {"n": int(self.values.size)}
'''

SPARK_SHADER = '''#version 450
layout(local_size_x = 16, local_size_y = 16) in;
#include "common.glsl"
#include "spark_bindings.glsl"

void main() {
    uint x = gl_GlobalInvocationID.x;
    uint y = gl_GlobalInvocationID.y;
    if (x >= P(SP_W) || y >= P(SP_H)) return;
    uint i = x * P(SP_N) / P(SP_W);  // small panels: the product stays below 2^32
    precise float v = min(max(data[i] * f(SP_GAIN), 0.0), 255.0);
    uint g = uint(v);
    imageStore(target, ivec2(int(P(SP_RECT_X) + x), int(P(SP_RECT_Y) + y)), uvec4(g, g, g, 255u));
}
'''


@pytest.fixture
def spark_folder(tmp_path):
    """The view's two files in a folder of their own; whatever they register is undone after."""
    (tmp_path / "spark.py").write_text(SPARK_MODULE)
    (tmp_path / "spark.comp").write_text(SPARK_SHADER)
    before = dict(passes.PASSES)
    yield tmp_path
    for registry in (SPECS, VIEWS):
        registry.pop("spark", None)
    passes.PASSES.clear()
    passes.PASSES.update(before)
    if tmp_path.resolve() in shaders.SOURCE_DIRS:
        shaders.SOURCE_DIRS.remove(tmp_path.resolve())


def test_a_new_view_is_its_module_its_shader_and_its_test(spark_folder, tmp_path):
    try:
        shaders.find_compiler()
    except shaders.CompilerMissingError as e:
        pytest.skip(f"the view's shader is compiled here: {e}")
    # the build's way: the declarations read from the file, nothing imported
    read = passes.read_declarations(spark_folder / "spark.py")
    assert [p.stem for p in read] == ["spark"] and "spark" not in SPECS
    passes.declare(*read)
    shaders.add_source_dir(spark_folder)
    # the import registers the view with the very declaration the build read (declare() would
    # refuse a different one)
    spec = importlib.util.spec_from_file_location("caliper_spark_view", spark_folder / "spark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert SPECS["spark"].cls is module.Spark and VIEWS["spark"] is module.Spark
    assert SPECS["spark"].bindings == {"spark": ("params", "data", "target")}
    assert "tests/test_view_unit.py" in profile_tests()  # tools/test runs it under every profile
    values = np.concatenate([np.linspace(-1, 5, 37, dtype=np.float32), [np.float32(3.999)]])
    assert_view_matches_twin(module.Spark(values, gain=50.0), 96, 24, tmp_path / "out")
    header = (spark_folder / "gen" / "spark_bindings.glsl").read_text()
    assert "layout(std430, binding = 1) readonly buffer Data { float data[]; };" in header


def test_a_declaration_the_build_cannot_read_names_its_file_and_line(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from caliper_vk.engine.shaders.params import ParamBlock\nWORDS = ['A']\n"
                   "BAD = ParamBlock('bad_params', 'BD', WORDS)\n")
    with pytest.raises(passes.DeclarationError, match=r"bad.py:3: the declaration of BAD uses 'WORDS'"):
        passes.read_declarations(bad)


BUILD_READS = textwrap.dedent('''
    import importlib.util, json, sys
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("_caliper_shader_build", "engine/shaders/__init__.py")
    shaders = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shaders)
    shaders.declare_modules(Path("caliper_vk/views"))
    assert not any(m == "vulkan" or m.startswith("caliper_vk") for m in sys.modules), sorted(sys.modules)
    print(json.dumps({"headers": shaders._headers(), "undeclared": shaders.undeclared(),
                      "digest": shaders.sources_digest()}))
''')


def test_the_build_reads_every_views_declarations_as_the_import_makes_them():
    """setup.py's way (the shader package loaded by path, the view modules read, nothing of
    Caliper or Vulkan imported) gives the very headers, and so the SPIR-V digest, of the imported
    views: the headers and the Python agree by construction."""
    out = subprocess.run([sys.executable, "-c", BUILD_READS], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    built = json.loads(out.stdout)
    assert built["undeclared"] == [] and shaders.undeclared() == []
    assert built["headers"] == shaders._headers()
    assert built["digest"] == shaders.sources_digest()
    # every registered view's passes are declared in the modules the build reads
    for name, spec in SPECS.items():
        for p in spec.passes:
            assert f"{p.header_name}" in built["headers"], (name, p.stem)


# Lists whose strings name several views but are not lists of views: the dashboard's recorded-panel
# kinds ("histogram", "confusion" are kinds of recorded panels there, not views).
NOT_VIEW_LISTS = {("caliper_vk/dashboard/folded.py", "SECTIONS")}


def _literal_lists(path: Path):
    """(name assigned or '', line, the strings) of each tuple, list, set or dict-keys literal."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    owner = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            owner[id(node.value)] = node.targets[0].id
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        strings = {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        yield owner.get(id(node), ""), node.lineno, strings


def test_no_other_file_keeps_a_list_of_views():
    """Only the registry knows the views: no Python file of the package, the engine, the tools or the
    benchmarks holds a literal collection naming two registered views (the self-test, the CLI, the
    profile runs and make_view ask the registry)."""
    names = set(SPECS)
    found = []
    for folder in ("caliper_vk", "engine", "tools", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for owner, line, strings in _literal_lists(path):
                if len(strings & names) >= 2 and (rel, owner) not in NOT_VIEW_LISTS:
                    found.append(f"{rel}:{line} {sorted(strings & names)}")
    assert not found, found
    # and the shader folder declares only the machinery and the common block and pass
    blocks = [v for v in vars(params).values() if isinstance(v, params.ParamBlock)]
    assert blocks == list(params.COMMON) == [params.RANGE]
    assert [v for v in vars(passes).values() if isinstance(v, passes.Pass)] == list(passes.COMMON)
    assert [p.stem for p in passes.COMMON] == ["range_resolve"]
