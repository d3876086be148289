"""Build hook: compile the built-in GLSL shaders -- compute (``*.comp``) and the
overlay's vertex/fragment stages (``*.vert``, ``*.frag``) -- to SPIR-V (validated
by spirv-val) and bake the glyph atlas from a real font (caliper_vk/assets/glyphs.npz) and
matplotlib's named colour tables (caliper_vk/assets/colormaps.npz).

The compiled modules land in ``engine/shaders/spv/`` and ship in the wheel as
package data of ``caliper_vk.engine.shaders``; an installed wheel never needs a
GLSL compiler. Everything else is declared in ``pyproject.toml``.
"""

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shader_module():
    return _load("_caliper_shader_build", HERE / "engine" / "shaders" / "__init__.py")


class BuildPyWithShaders(build_py):
    def run(self):
        shaders = _shader_module()
        if shutil.which("spirv-val") is None:
            self.warn("spirv-val not found (apt-get install spirv-tools): shaders built but not validated")
        built = shaders.build_all(shaders.SPV_DIR)
        self.announce(f"compiled {len(built)} shaders to SPIR-V", level=2)
        glyphs = _load("_caliper_glyphs", HERE / "caliper_vk" / "glyphs.py")
        glyphs.bake(glyphs.ASSET)
        self.announce(f"baked the glyph atlas into {glyphs.ASSET.name}", level=2)
        colormaps = _load("_caliper_colormaps", HERE / "caliper_vk" / "colormaps.py")
        colormaps.bake(colormaps.ASSET)
        self.announce(f"baked the colour tables into {colormaps.ASSET.name}", level=2)
        super().run()


setup(cmdclass={"build_py": BuildPyWithShaders})
