"""Parameter blocks are declared once (a view's in its module, engine/shaders/params.py the
machinery and the common ones): the shaders' headers are generated from the declarations, the views
and custom panels pack through them, and no hand-kept mirror of an offset is left in a shader
source."""

import re

import numpy as np
import pytest

from caliper_vk.engine import shaders
from caliper_vk.engine.shaders import passes
from caliper_vk.engine.shaders.params import ParamBlock
from caliper_vk.views._pointfit import POINTCLOUD

BUILTIN = tuple(passes.blocks().values())  # every declared block (importing the views declares theirs)


def test_generated_headers_are_what_the_declarations_say(tmp_path):
    out = shaders.generated_headers(tmp_path)
    for block in BUILTIN:
        text = (out / f"{block.name}.glsl").read_text()
        for k, (field, _) in enumerate(block.fields):
            assert f"#define {block.prefix}_{field} {k}\n" in text
        for field in block.kinds:  # each field (an array field: its first word) by name
            first, count, _ = block.field(field.lower())
            assert getattr(block, field) == first and f"#define {block.prefix}_{field} {first}\n" in text
            assert [w for w, _ in block.fields[first:first + count]] == (
                [field] if count == 1 else [f"{field}{i}" for i in range(count)])
        for const, literal in block.constants.items():
            assert f"#define {const} {literal}\n" in text
        assert f"#define {block.prefix}_VEC4S {block.vec4s}\n" in text
        if block.layout == "uniform":
            assert block.words % 4 == 0 and block.words >= len(block.fields)


def test_no_shader_source_keeps_its_own_copy_of_an_offset():
    """An offset defined by hand in a shader would shadow or drift from the declaration."""
    prefixes = "|".join(b.prefix for b in BUILTIN)
    for src in shaders.HERE.glob("*.*"):
        if src.suffix in (".comp", ".glsl", ".vert", ".frag"):
            found = re.findall(rf"^\s*#define ({prefixes})_\w+ \d+", src.read_text(), re.M)
            assert not found, f"{src.name} defines {found}: declare it in its ParamBlock"
    assert not list(shaders.HERE.glob("*_params.glsl")), "headers are generated into gen/, not kept"


def test_pack_rounds_floats_once_and_names_missing_and_unknown_fields():
    block = ParamBlock("t_params", "T", ["A", ("B", "float"), ("C", "int")], layout="buffer")
    words = block.pack({"A": 7, "B": 0.1, "C": -2})
    assert words.tolist() == [7, int(np.float32(0.1).view(np.uint32)), 0xFFFFFFFE]
    with pytest.raises(KeyError, match=r"missing \['C'\].*not fields of this block: \['D'\]"):
        block.pack({"A": 1, "B": 2.0, "D": 3})
    with pytest.raises(ValueError, match="kind 'double'"):
        ParamBlock("bad", "X", [("A", "double")])


def test_views_fill_exactly_their_blocks_words():
    from caliper_vk.views import Heatmap, PointCloud

    p = PointCloud(np.zeros((3, 3), np.float32)).params(64, 48)
    words = np.asarray(p)
    assert words.dtype == np.uint32 and words.size == POINTCLOUD.words == 48
    assert p["w"] == 64 and p["h"] == 48 and words[POINTCLOUD.W] == 64
    h = np.asarray(Heatmap(np.ones((2, 5), np.float32)).params(10, 10))
    assert h.size == 16 and h[1] == 5  # HM_COLS is word 1 in the generated header
