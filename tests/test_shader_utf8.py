"""User shader files are UTF-8 whatever the locale (Windows' is often cp1252): a module with a
non-ASCII comment is read, compiled and diagnosed in a process whose locale encoding is ASCII."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not (shutil.which("glslc") or shutil.which("glslangValidator")),
                                reason="no GLSL compiler on PATH (apt-get install glslc)")

SCRIPT = textwrap.dedent("""
    import locale, sys
    from caliper_vk.shader_module import ShaderCompileError, ShaderModule
    from caliper_vk.views.custom import CustomPanel

    assert locale.getpreferredencoding(False).lower() not in ("utf-8", "utf8"), locale.getpreferredencoding()
    good, bad = sys.argv[1:]
    module = ShaderModule.from_file(good)
    assert "Gr\\u00f6\\u00dfe" in module.source
    CustomPanel(color=module).build()
    try:
        CustomPanel(color=ShaderModule.from_file(bad)).build()
    except ShaderCompileError as e:
        assert e.line == 3 and "undefined_gain" in e.message, str(e)
        print("diagnosed", e.file)
    """)


def test_a_non_ascii_comment_under_an_ascii_locale(tmp_path):
    good, bad = tmp_path / "ramp.glsl", tmp_path / "bad.glsl"
    good.write_text("// Farbe nach Größe: t² — «ramp»\nvec4 color(float v, uint i) {\n"
                    "    float t = to_unit(v);\n    return vec4(t, t * t, 1.0 - t, 1.0);\n}\n",
                    encoding="utf-8")
    bad.write_text("// état\nvec4 color(float v, uint i) {\n"
                   "    return vec4(undefined_gain, 0.0, 0.0, 1.0); // ü\n}\n", encoding="utf-8")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0",
           "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(good), str(bad)], capture_output=True,
                          env=env, encoding="utf-8", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"diagnosed {bad}" in proc.stdout
