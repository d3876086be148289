"""What works without the optional dependencies: recorded runs without torch, the built-in colour
tables without matplotlib."""

import subprocess
import sys

import pytest


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_listing_the_bundled_runs_and_the_cli_import_no_torch():
    """caliper view and caliper render read recorded runs: they work without torch installed."""
    assert run("import sys; from caliper_vk.runs import example_paths; from caliper_vk import cli; "
               "example_paths(); print('torch' in sys.modules)") == "False"


def test_the_sweep_names_are_the_training_scripts():
    from caliper_vk.runs import LATER_NAMES, SWEEP_NAMES, digits_mlp

    assert tuple(digits_mlp.SWEEP) == SWEEP_NAMES and tuple(digits_mlp.LATER) == LATER_NAMES


def test_without_matplotlib_the_built_in_tables_work_and_others_say_what_to_install():
    """A finder that refuses matplotlib stands in for an environment without it."""
    code = (
        "import sys\n"
        "class NoMatplotlib:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'matplotlib':\n"
        "            raise ImportError('no matplotlib here')\n"
        "sys.meta_path.insert(0, NoMatplotlib())\n"
        "from caliper_vk import colormaps\n"
        "assert len(colormaps.lut('magma')) == 256 and len(colormaps.palette('tab10')) == 10\n"
        "try:\n"
        "    colormaps.lut('Blues')\n"
        "except colormaps.UnknownColormapError as e:\n"
        "    print(e)\n"
    )
    assert "pip install matplotlib" in run(code)


def test_the_shipped_colour_tables_are_matplotlibs():
    """The prebuilt tables (kept in the repository) equal matplotlib's sampling of each name."""
    pytest.importorskip("matplotlib")
    from caliper_vk import colormaps

    for name in colormaps.SEQUENTIAL + colormaps.DIVERGING + colormaps.PALETTES:
        assert colormaps._baked()[name].tolist() == colormaps._sample(name).tolist(), name
