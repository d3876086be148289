"""Built-in shaders compile, pass spirv-val, and compile errors name file and line."""

import shutil

import pytest

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
