"""A view is one unit: it registers itself with its passes, its parameter block, its inputs and its
tests; its block and each pass's bindings are declared once, by name, in its own module (which the
build reads without importing it), generated for GLSL and bound by name in Python; parameters are
set by field name."""

import re
import struct
from pathlib import Path

import numpy as np
import pytest

from caliper_vk.engine import shaders
from caliper_vk.engine.shaders import passes
from caliper_vk.engine.shaders.params import ParamBlock, ParamValues
from caliper_vk.views import SPECS, VIEWS, profile_tests, register_view
from caliper_vk.views._pointfit import POINTCLOUD
from caliper_vk.views.heatmap import HEATMAP

ROOT = Path(__file__).resolve().parent.parent
STORAGE_KINDS = {0: "image", 2: "uniform", 12: "buffer"}  # SPIR-V storage classes of the resources


def spirv_bindings(spv: bytes) -> dict[int, str]:
    """{binding: kind} of a SPIR-V module's resource variables (OpDecorate Binding, OpVariable)."""
    words = struct.unpack(f"<{len(spv) // 4}I", spv)
    binding_of, class_of, at = {}, {}, 5
    while at < len(words):
        count, op = words[at] >> 16, words[at] & 0xFFFF
        if op == 71 and words[at + 2] == 33:  # OpDecorate <id> Binding <k>
            binding_of[words[at + 1]] = words[at + 3]
        elif op == 59:  # OpVariable <type> <id> <storage class>
            class_of[words[at + 2]] = words[at + 3]
        at += count
    return {k: STORAGE_KINDS.get(class_of[v], f"class {class_of[v]}") for v, k in binding_of.items()}


@pytest.mark.parametrize("stem", sorted(passes.PASSES))
def test_each_pass_declares_its_bindings_once_and_its_spirv_has_them(stem):
    declared = passes.get(stem)
    src = (shaders.HERE / f"{stem}.comp").read_text()
    assert f'#include "{declared.header_name}"' in src, f"{stem}.comp must include its generated bindings"
    assert not re.search(r"^\s*layout\([^)]*binding\s*=", src, re.M), (
        f"{stem}.comp declares a binding by hand: declare it in its Pass")
    found = spirv_bindings(shaders.load(stem))
    kinds = dict(enumerate(declared.kinds))
    assert found and all(kinds.get(k) == kind for k, kind in found.items()), (found, kinds)


def test_every_shader_with_a_parameter_block_is_a_declared_pass_of_a_registered_view():
    """A view's new shader cannot skip the declaration, nor a declaration outlive its view."""
    used = {p.stem for spec in SPECS.values() for p in spec.passes}
    assert used == set(passes.PASSES), set(passes.PASSES) ^ used
    for src in shaders.sources():
        text = src.read_text()
        if re.search(r'#include "\w+_(params|bindings)\.glsl"', text):
            assert src.stem in passes.PASSES, f"{src.name}: declare its Pass in its view's module"
    assert shaders.undeclared() == []


def test_generated_bindings_header_follows_the_declaration(tmp_path):
    out = shaders.generated_headers(tmp_path)
    text = (out / "heatmap_bindings.glsl").read_text()
    assert '#include "heatmap_params.glsl"' in text
    assert "layout(std140, binding = 0) uniform Params { uvec4 PV[HM_VEC4S]; };" in text
    assert "layout(std430, binding = 1) readonly buffer Data { uint data[]; };" in text
    assert "layout(rgba8ui, binding = 4) uniform writeonly uimage2D target;" in text
    fit = (out / "pointcloud_fit_bindings.glsl").read_text()  # it writes its parameters: storage
    assert "layout(std430, binding = 0) buffer Params { uvec4 PV[PC_VEC4S]; };" in fit


def test_every_view_is_registered_with_passes_block_inputs_and_existing_tests():
    assert set(VIEWS) == {"pointcloud", "heatmap", "histogram", "curve", "confusion", "images", "text",
                          "textgrid"}
    for name, spec in SPECS.items():
        assert VIEWS[name] is spec.cls and spec.cls.view_spec is spec
        assert spec.passes and spec.inputs and spec.tests, name
        assert isinstance(spec.block, ParamBlock)
        assert spec.inputs[0] in spec.cls.__init__.__code__.co_varnames, (name, spec.inputs)
        for test in (*spec.tests, *(t.split("::")[0] for t in spec.profile_skip)):
            assert (ROOT / test).is_file(), (name, test)
    args = profile_tests()
    assert "tests/test_heatmap_exact.py" in args and len(set(args)) == len(args)
    assert args[args.index("--deselect") + 1].startswith("tests/test_textgrid_exact.py::")


def test_tools_test_and_the_cli_take_the_views_from_the_registry():
    script = (ROOT / "tools" / "test").read_text()
    assert "from caliper_vk.views import profile_tests" in script
    listed = script[script.index("PROFILE_TESTS=("):].split(")", 1)[0]
    assert '"${VIEW_TESTS[@]}"' in listed
    for spec in SPECS.values():  # no view's test file is listed by hand
        for test in spec.tests:
            assert test not in listed, test
    from caliper_vk import cli

    render = cli.build_parser()._subparsers._group_actions[0].choices["render"]
    text = " ".join(render.format_help().split())
    listed = ", ".join(name for name, spec in SPECS.items() if spec.cli)
    assert f"--view VIEW the view to draw: {listed}" in text and "heatmap" in listed


def test_a_view_registers_unknown_passes_and_names_twice_as_errors():
    with pytest.raises(KeyError, match=r"no pass 'nope' is declared.*declared: "):
        register_view("nope", passes=("nope",))
    with pytest.raises(ValueError, match="registered twice"):
        register_view("heatmap", passes=("heatmap",))(type("Other", (), {}))
    assert VIEWS["heatmap"].__name__ == "Heatmap"


def test_parameters_are_set_and_read_by_field_name():
    p = POINTCLOUD.values(w=64, cx=0.1, r=np.arange(9) / 7, rect_x=3)
    words = np.asarray(p)
    assert words[POINTCLOUD.W] == 64 and words[POINTCLOUD.RECT_X] == 3
    assert words[POINTCLOUD.CX] == np.float32(0.1).view(np.uint32)  # rounded to float32 once
    assert p["r"] == [float(np.float32(v)) for v in np.arange(9) / 7]
    assert p.set(CX=2.5)["cx"] == 2.5 and p.copy() == p
    with pytest.raises(KeyError, match="has no field 'radius'; its fields: n, dim, w, h"):
        p.set(radius=1)
    with pytest.raises(ValueError, match=r"pointcloud_params.r takes 9 values, got 3"):
        p.set(r=[1, 2, 3])
    h = HEATMAP.values(lo=-1.5, n=7)
    assert h["lo"] == -1.5 and h["n"] == 7 and isinstance(h, ParamValues)


def test_a_pass_binds_by_name_and_names_what_is_missing_or_unknown():
    from caliper_vk.engine import Buffer, default_device
    from caliper_vk.views._base import pipeline

    device = default_device()
    pipe = pipeline(device, "range_resolve")
    assert pipe.names == ("params", "stats")
    with Buffer(device, 64) as a, Buffer(device, 64) as b:
        with pytest.raises(ValueError, match="range_resolve binds params, stats: missing stats; "
                                             "no binding named data"):
            pipe.bind(params=a, data=b)
        with pytest.raises(TypeError, match="in binding order or"):
            pipe.bind([a, b], params=a)
        pipe.bind(params=a, stats=b).close()
