"""The text view: glyphs from a baked font atlas, blended with integers, byte-exact."""

import numpy as np
import pytest

from caliper_vk import glyphs
from caliper_vk.views import Text
from images import assert_view_matches_twin

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

SAMPLE = ("ROMEO: But soft, what light through yonder window breaks?\n"
          "It is the east, and Juliet is the sun.")


def test_atlas_is_baked_from_a_real_font():
    atlas, font = glyphs.atlas()
    assert atlas.shape[0] == len(glyphs.CODES) and atlas.dtype == np.uint8
    assert atlas[glyphs.encode("M")[0]].max() == 255  # a solid stroke
    assert atlas[glyphs.encode(" ")[0]].max() == 0
    assert font


def test_atlas_covers_latin_greek_and_the_symbols_the_chrome_uses():
    atlas, _ = glyphs.atlas()
    unknown = atlas[glyphs.UNKNOWN]
    for ch in "éüßøŁœΩλ…–—≤≥→×±■−∞€":
        assert glyphs.covers(ch), ch
        g = atlas[glyphs.encode(ch)[0]]
        assert g.max() > 0 and not np.array_equal(g, unknown), ch
    # ASCII keeps its indices (code - 32) whatever else the atlas holds
    assert list(glyphs.encode(" A~")) == [0, ord("A") - 32, ord("~") - 32]
    # outside the atlas: '?'; a no-break space draws as a space
    assert list(glyphs.encode("😀\u4e2d\x07")) == [glyphs.UNKNOWN] * 3
    assert not glyphs.covers("😀")
    assert glyphs.encode("\u00a0")[0] == glyphs.encode(" ")[0]


def test_a_stale_atlas_is_baked_again(tmp_path, monkeypatch):
    stale = tmp_path / "glyphs.npz"
    np.savez_compressed(stale, atlas=np.zeros((95, 18, 8), np.uint8), font=np.array("old"))
    monkeypatch.setattr(glyphs, "ASSET", stale)
    glyphs.atlas.cache_clear()
    try:
        atlas, _ = glyphs.atlas()
        assert atlas.shape[0] == len(glyphs.CODES)
        with np.load(stale) as z:
            assert tuple(int(c) for c in z["codes"]) == glyphs.CODES
    finally:
        glyphs.atlas.cache_clear()


@pytest.mark.parametrize("name, make, size", [
    ("plain", lambda: Text(SAMPLE), (420, 80)),
    ("wrapped", lambda: Text(SAMPLE), (150, 200)),
    ("scrolls-to-newest", lambda: Text("\n".join(f"line {i}" for i in range(40))), (120, 60)),
    ("latin-and-symbols", lambda: Text("naïve café — ok … Ωλ ≤ 3 → ∞"), (260, 30)),
    ("outside-the-atlas-becomes-?", lambda: Text("emoji 😀 han 中"), (200, 30)),
    ("tiny-panel", lambda: Text(SAMPLE), (5, 5)),
    ("empty", lambda: Text(""), (50, 20)),
])
def test_text_matches_twin(name, make, size, artifacts):
    assert_view_matches_twin(make(), *size, artifacts)


def test_samples_with_headers(artifacts):
    view = Text(max_entries=3)
    for step in range(5):
        view.append(f"sample at step {step * 100}: the quick brown fox", header=f"step {step * 100}")
    assert len(view.entries) == 3
    assert_view_matches_twin(view, 300, 120, artifacts)
    grid, _colors, _cols, _rows = view.layout(300, 120)
    shown = " ".join("".join(chr(g + 32) for g in row if g != 0xFFFFFFFF) for row in grid)
    assert "sample at step 400" in shown and "step 100" not in shown


def test_session_shows_host_fed_samples_beside_live_tensors():
    import caliper_vk as cv

    with cv.Session(window=False, size=(400, 200)) as s:
        t = cv.empty((300, 3))
        t.normal_()
        s.attach(t, "pointcloud", name="emb")
        samples = cv.Text(max_entries=5)
        panel = s.add(samples, name="samples")
        assert panel.path == "host data"
        samples.append("ROMEO: soft!", header="step 100")
        frame = s.render()
        assert np.array_equal(frame, s.canvas.reference())
        assert "samples: host data" in s.status().line()
        panel.close()
        assert [p.name for p in s.panels] == ["emb"]
