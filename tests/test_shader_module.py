"""Custom panels from user shader modules: composition, checks before compiling, compiler
errors at the user's file and line, the source-hash cache, byte-exact multi-input panels
against their numpy twins, and a broken panel in a live session beside a working one."""

import shutil

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk import exporters
from caliper_vk.engine import shaders
from caliper_vk.shader_module import (ShaderCompileError, ShaderModule, ShaderSignatureError,
                                      compose)
from caliper_vk.views.custom import CustomPanel, ExactMismatchError, to_unit
from images import assert_same_image

needs_compiler = pytest.mark.skipif(
    not (shutil.which("glslc") or shutil.which("glslangValidator")),
    reason="no GLSL compiler on PATH (apt-get install glslc)")

RAMP = """// a colour ramp
vec4 color(float v, uint i) {
    float t = to_unit(v);
    return vec4(t * gain, t * t, 1.0 - t, 1.0);
}
"""


def ramp_twin(v, i, p):
    t = to_unit(v, p)
    return np.stack([t * p["gain"], t * t, np.float32(1) - t, np.ones_like(t)], axis=-1)


MIX = """
uvec4 shade(uvec2 px, uvec2 size) {
    uint row = (px.y * a_rows()) / size.y;
    float va = a_at(row, (px.x * a_cols()) / size.x);
    float vb = b_at(px.x % b_len());
    float vc = c_at(px.y % c_len());
    precise float s = va * gain + vb;
    uint lum = s > vc ? 220u : 30u;
    return uvec4(lum, uint(int(vc) + offset) & 255u, px.x ^ px.y, 255u);
}
"""


def mix_twin(inputs, p, w, h):
    a, b, c = inputs["a"], inputs["b"].reshape(-1), inputs["c"].reshape(-1)
    py, px = np.mgrid[0:h, 0:w]
    va = a[(py * a.shape[0]) // h, (px * a.shape[1]) // w]
    vc = c[py % c.size]
    s = va * p["gain"] + b[px % b.size]
    out = np.empty((h, w, 4), np.int64)
    out[..., 0] = np.where(s > vc, 220, 30)
    out[..., 1] = (vc.astype(np.int64) + int(p["offset"])) & 255
    out[..., 2] = px ^ py
    out[..., 3] = 255
    return out


def test_composition_is_text_with_the_users_file_and_lines():
    module = ShaderModule("#version 450\n" + RAMP, name="my_colour.glsl")
    comp = compose(module, "color", ["data"], [("gain", "float")])
    text = comp.text
    assert text.startswith("#version 450\n#extension GL_GOOGLE_cpp_style_line_directive")
    assert text.count("#version") == 1  # the user's own #version line is blanked, not moved
    user = text.split('#line 1 "my_colour.glsl"\n', 1)[1]
    assert user.splitlines()[2] == "precise vec4 color(float v, uint i) {"  # still on line 3
    block = text.split("buffer CvParams {", 1)[1].split("};", 1)[0].split()
    assert block[-2:] == ["float", "gain;"] and "cv_data_dtype;" in block
    assert "float data_at(uint i)" in text and "#define CV_COLOR_MODE" in text
    assert comp.bindings == ["buffer", "buffer", "image"]
    panel = CustomPanel(color=module, params={"gain": 2.0})
    assert panel.param_words(8, 8).size == len(comp.block.fields)  # host and GLSL agree on the layout


def test_missing_function_names_the_expected_signature():
    with pytest.raises(ShaderSignatureError, match=r"(?s)defines no function color\(\).*\n"
                       r"    vec4 color\(float v, uint i\).*defines colour\(\)"):
        compose(ShaderModule("vec4 colour(float v, uint i) { return vec4(v); }"), "color", ["data"])


def test_wrong_signature_names_the_line_and_both_signatures():
    src = "// x\nuvec4 shade(vec2 px) {\n  return uvec4(0u);\n}\n"
    with pytest.raises(ShaderSignatureError, match=r"(?s)^m\.glsl:2: shade\(\) is defined as "
                       r"'uvec4 shade\(vec2 px\)'.*\n    uvec4 shade\(uvec2 px, uvec2 size\)"):
        compose(ShaderModule(src, name="m.glsl"), "raster")
    with pytest.raises(ShaderSignatureError, match="the panel writes main"):
        compose(ShaderModule("void main() {}\nuvec4 shade(uvec2 p, uvec2 s) { return uvec4(0u); }"),
                "raster")


def test_wrong_input_dtype_and_bad_names_are_refused_before_drawing():
    with pytest.raises(TypeError, match=r"'a' has dtype float64; custom panels read float32, float16, "
                       r"bfloat16, int32, uint8.*astype\(np.float32\)"):
        CustomPanel(raster=MIX, inputs={"a": np.zeros((2, 2)), "b": None, "c": None})
    with pytest.raises(TypeError, match="'b' has dtype bool"):
        CustomPanel(raster=MIX, inputs={"a": None, "b": torch.zeros(3, dtype=torch.bool), "c": None})
    with pytest.raises(ValueError, match="'float' is reserved"):
        CustomPanel(raster=MIX, params={"float": 1.0})
    panel = CustomPanel(color=RAMP, params={"gain": 1.0})
    with pytest.raises(KeyError, match="unknown parameter 'gian'; this panel's parameters: gain"):
        panel.set(gian=2.0)


@needs_compiler
def test_compile_error_points_at_the_users_file_and_line(tmp_path):
    path = tmp_path / "bad_colour.glsl"
    path.write_text("vec4 color(float v, uint i) {\n    float t = to_unit(v);\n"
                    "    return vec4(t, undefined_gain * t, 0.0, 1.0);\n}\n")
    panel = CustomPanel(color=ShaderModule.from_file(path))
    with pytest.raises(ShaderCompileError) as err:
        panel.build()
    e = err.value
    assert (e.file, e.line) == (str(path), 3)
    assert "undefined_gain" in e.message
    assert f"{path}:3: error:" in str(e) and "undefined_gain * t, 0.0, 1.0);" in str(e)
    with pytest.raises(ShaderCompileError):  # the same error again, not a crash later
        cv.Canvas(32, 32).add(panel)


@needs_compiler
def test_compiled_modules_are_cached_by_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = CustomPanel(color=RAMP + "// cache test\n", params={"gain": 1.0}).build()
    assert len(list(tmp_path.rglob("*.spv"))) == 1

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler ran for a source already in the cache")

    monkeypatch.setattr(shaders, "compile_file", no_compiler)
    again = CustomPanel(color=RAMP + "// cache test\n", params={"gain": 5.0}).build()
    assert again == first  # parameter values are data, not source
    with pytest.raises(AssertionError, match="the compiler ran"):
        CustomPanel(color=RAMP + "// another source\n", params={"gain": 1.0}).build()


@needs_compiler
def test_multi_input_panel_is_byte_exact_against_its_numpy_twin(artifacts):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((13, 29)).astype(np.float16)
    b = torch.randn(41).to(torch.bfloat16)
    c = rng.integers(-200, 200, 23).astype(np.int32)
    panel = CustomPanel(raster=MIX, inputs={"a": a, "b": b, "c": c},
                        params={"gain": 1.75, "offset": -3}, reference=mix_twin)
    first = panel.check(203, 157, save_to=artifacts)
    panel.set(gain=-0.5, offset=40)
    second = panel.check(203, 157, save_to=artifacts)
    assert not np.array_equal(first, second)  # the parameters reached the shader


@needs_compiler
def test_a_twin_that_differs_fails_the_check_and_leaves_evidence(tmp_path):
    def off_by_one(inputs, p, w, h):
        out = mix_twin(inputs, p, w, h)
        out[7, 11, 2] += 1
        return out

    data = {"a": np.ones((3, 3), np.float32), "b": np.zeros(2, np.float32), "c": np.zeros(2, np.int32)}
    panel = CustomPanel(raster=MIX, inputs=data, params={"gain": 1.0, "offset": 0}, reference=off_by_one)
    with pytest.raises(ExactMismatchError, match=r"1 of 1200 pixels differ .*\(7,11\)"):
        panel.check(40, 30, save_to=tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"actual.png", "expected.png", "diff.png"}


@needs_compiler
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
def test_color_panel_is_byte_exact_in_every_dtype(dtype, artifacts):
    data = (np.random.default_rng(5).standard_normal((19, 31)) * 40).astype(dtype)
    panel = CustomPanel(color=RAMP, inputs={"data": data}, params={"gain": 1.5}, reference=ramp_twin)
    img = panel.check(160, 120, save_to=artifacts)
    assert len(np.unique(img.reshape(-1, 4), axis=0)) > 50


@needs_compiler
def test_broken_panel_in_a_live_session_while_another_keeps_drawing(tmp_path, artifacts, capsys):
    bad = tmp_path / "broken.glsl"
    bad.write_text("uvec4 shade(uvec2 px, uvec2 size) {\n    return uvec4(px.x, 0u, 0u, 255u)\n}\n")
    with cv.Session(window=False, size=(320, 200), budget=None) as s:  # step() draws
        h = torch.randn(12, 20)  # held: a panel on a tensor nobody holds says it is not updated
        heat = s.attach(h, "heatmap", name="heat")
        a, b = cv.empty((6, 9)), cv.empty((17,), dtype=torch.float16)
        a.copy_(torch.randn(6, 9))
        b.copy_(torch.randn(17))
        c = torch.arange(-5, 6, dtype=torch.int32)
        good = s.attach({"a": a, "b": b, "c": c}, name="mix", view=CustomPanel(
            raster=MIX, inputs=("a", "b", "c"), params={"gain": 1.0, "offset": 0}, reference=mix_twin))
        broken = s.attach(torch.randn(8), view=CustomPanel(raster=ShaderModule.from_file(bad)),
                          name="broken")
        assert broken.error.startswith(f"{bad}:3: ") and "syntax error" in broken.error
        assert f"panel broken stopped: {bad}:3: error:" in capsys.readouterr().err
        assert good.path == heat.path == "zero-copy" and not good.error
        first = s.render()
        assert_same_image(first, s.canvas.reference(), artifacts)
        with good.writing():
            a.mul_(-1.0)
        second = s.render()
        assert not np.array_equal(first, second)
        assert_same_image(second, s.canvas.reference(), artifacts)
        line = s.status().line()
        assert "heat: zero-copy" in line and "broken: stopped" in line
        with pytest.raises(exporters.UnsupportedDtypeError):  # refused; the session goes on
            s.attach(torch.zeros(4, dtype=torch.float64), view=CustomPanel(color=RAMP, params={"gain": 1.0}))
        assert s.step() and [p.name for p in s.panels] == ["heat", "mix", "broken"]
