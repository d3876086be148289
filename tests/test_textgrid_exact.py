"""The textgrid view (logit-lens grids) on the GPU equals its numpy twin, byte for byte."""

import numpy as np
import pytest
import torch

import caliper_vk as cv
from caliper_vk.demos.chargpt import CharData, CharGPT, Config, logit_lens
from caliper_vk.engine import Canvas
from caliper_vk.views import TextGrid, make_view
from caliper_vk.views._source import Source
from caliper_vk.views.textgrid import BACKGROUND, DARK_TEXT, LIGHT_TEXT, encode, glyph_table
from images import assert_same_image, assert_view_matches_twin
from device_paths import cpu_path

pytestmark = pytest.mark.trimmed  # in the hardware scripts' trimmed suite (pyproject.toml)

RNG = np.random.default_rng(7)
CHARS = list("etaoin shrd\nlu,.")


def chars(shape):
    return RNG.choice(CHARS, size=shape).tolist()


def specials(shape):
    a = RNG.random(shape).astype(np.float32)
    flat = a.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
    flat[1::17] = 1.7  # above the fixed range
    flat[2::19] = -0.3  # below it
    flat[4::23] = np.float32(1e-41)  # subnormal
    return a


LENS = dict(row_labels=["L0", "L1", "L2", "L3"], col_labels="First Citizen:\nBef")
CASES = {
    "lens-labels-specials": (specials((4, 18)), dict(tokens=chars((4, 18)), **LENS), (560, 130)),
    "auto-range-magma": (RNG.normal(size=(5, 9)), dict(tokens=chars((5, 9)), value_range="auto",
                                                       colormap="magma"), (300, 140)),
    "one-by-one": (np.array([[0.42]]), dict(tokens=[["Q"]], row_labels=["L0"], col_labels="x"),
                   (40, 40)),
    "empty-0x0": (np.zeros((0, 0)), {}, (64, 32)),
    "empty-0x5": (np.zeros((0, 5)), dict(col_labels="abcde"), (64, 32)),
    "large-grid-colour-only": (RNG.random((300, 500)), dict(tokens=[["x"] * 500] * 300), (250, 160)),
    "long-tokens-clipped": (RNG.random((3, 4)), dict(tokens=[["antidisestablishment", "to", "be", ""],
                                                             ["or not", "to be", "that is", "the"],
                                                             ["question", "\n", " ", "  x"]]),
                            (260, 90)),
    "non-ascii-replaced": (RNG.random((2, 3)), dict(tokens=[["naïve", "café", "π"], ["—", "ok", "日本"]],
                                                    row_labels=["über", "L1"]), (240, 60)),
    "ids-and-vocab": (RNG.random((3, 6)), dict(ids=RNG.integers(0, 4, (3, 6)), vocab=["a", "b", " ", "\n"]),
                      (200, 80)),
    "tiny-panel": (RNG.random((3, 3)), dict(tokens=chars((3, 3)), row_labels=["a", "b", "c"]),
                   (5, 5)),
    "labels-give-way": (RNG.random((2, 2)), dict(row_labels=["a very long label"] * 2, col_labels="ab"),
                        (30, 30)),
    "one-d-row": (np.linspace(0, 1, 12), dict(tokens=list("abcdefghijkl")), (240, 30)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_textgrid_matches_twin(name, artifacts):
    data, options, (w, h) = CASES[name]
    assert_view_matches_twin(TextGrid(data, **options), w, h, artifacts)


def bf16(a):
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("dtype, array", [
    ("float32", specials((3, 8))),
    ("float16", specials((3, 8)).astype(np.float16)),
    ("bfloat16", bf16(specials((3, 8)))),
    ("int32", RNG.integers(-2, 3, (3, 8)).astype(np.int32)),
    ("uint8", RNG.integers(0, 3, (3, 8)).astype(np.uint8)),
])
def test_every_stored_dtype(dtype, array, artifacts):
    view = TextGrid(tokens=chars((3, 8)), row_labels=["L0", "L1", "L2"], col_labels="abcdefgh")
    view.set_source(Source(array, dtype, live=True))
    assert_view_matches_twin(view, 200, 80, artifacts)


def test_counts_and_colours_of_special_cells():
    view = TextGrid(np.array([[np.nan, np.inf, -np.inf, 2.0, -1.0, 0.5]], np.float32))
    with Canvas(60, 10) as canvas:
        canvas.add(view)
        img = canvas.render()
    assert view.stats == {"nan": 1, "posinf": 1, "neginf": 1, "below": 1, "above": 1}
    assert len({tuple(img[5, x]) for x in (5, 15, 25)}) == 3  # NaN, +Inf, -Inf: own colours
    assert tuple(img[5, 35]) != tuple(img[5, 45])  # clamped ends of the colormap


def test_text_colour_contrasts_with_the_cell():
    """Dark text on the bright end of viridis, light text on the dark end."""
    view = TextGrid(np.array([[0.0, 1.0]], np.float32), tokens=[["M", "M"]])
    with Canvas(80, 30) as canvas:
        canvas.add(view)
        img = canvas.render()
    dark_cell, bright_cell = img[:, :39, :3].reshape(-1, 3), img[:, 40:, :3].reshape(-1, 3)
    assert any((p == LIGHT_TEXT[:3]).all() for p in dark_cell)
    assert any((p == DARK_TEXT[:3]).all() for p in bright_cell)


def test_cells_too_small_for_glyphs_still_show_every_colour():
    values = np.linspace(0, 1, 40, dtype=np.float32).reshape(4, 10)
    view = TextGrid(values, tokens=[["word"] * 10] * 4)
    with Canvas(30, 12) as canvas:  # 3 x 3 pixel cells
        canvas.add(view)
        img = canvas.render()
    assert view.layout(30, 12)["fit"] == 0
    colours = {tuple(c) for c in img.reshape(-1, 4)}
    assert len(colours) >= 38  # every cell's colour (two neighbours may round to one entry)


def test_clipping_and_replacements_are_visible():
    table, extra = glyph_table()
    assert all(table[extra[k]].max() > 200 for k in ("middot", "newline", "ellipsis"))  # drawn
    assert encode("antidis", 4).tolist()[-1] == extra["ellipsis"]
    assert len(encode("antidis", 4)) == 4 and encode("ant", 4).tolist() == encode("ant", 9).tolist()
    assert encode("é", 3).tolist() != encode("?", 3).tolist()  # Latin-1 has its own glyphs
    assert encode("中", 3).tolist() == encode("?", 3).tolist()
    assert encode(" \n", 3).tolist() == [extra["middot"], extra["newline"]]


@pytest.mark.parametrize("make, message", [
    (lambda: TextGrid(np.zeros((2, 3)), tokens=[["a", "b"]]), "tokens have shape (1, 2)"),
    (lambda: TextGrid(np.zeros((2, 3)), ids=[[0, 1, 9], [0, 0, 0]], vocab="ab"), "token id 9"),
    (lambda: TextGrid(np.zeros((1, 2)), tokens=[[1, 2]]), "tokens must be strings"),
    (lambda: TextGrid(np.zeros((2, 2)), row_labels=["L0"]), "row_labels has 1 entries"),
    (lambda: TextGrid(np.zeros((2, 2)), ids=[[0, 1], [1, 0]]), "ids need a vocab"),
    (lambda: TextGrid(np.zeros((2, 2, 2))), "takes (rows, cols)"),
])
def test_mistakes_are_named(make, message):
    with pytest.raises((ValueError, TypeError)) as err:
        make()
    assert message in str(err.value)


def test_attached_probabilities_with_tokens_updated_per_step(artifacts):
    with cv.Session(window=False, size=(320, 160)) as s:
        probs = cv.empty((4, 12))
        probs.copy_(torch.rand(4, 12))
        panel = s.attach(probs, view="textgrid", name="lens", tokens=chars((4, 12)),
                         row_labels=["L0", "L1", "L2", "L3"], col_labels="hello world!")
        assert panel.path == cpu_path() and isinstance(panel.view, TextGrid)
        first = s.render()
        assert_same_image(first, s.canvas.reference(), artifacts)
        with panel.writing():
            probs.mul_(0.5)
        panel.view.set_tokens(ids=np.arange(48).reshape(4, 12) % 3, vocab=["x", "y", "z"])
        second = s.render()
        assert not np.array_equal(first, second)
        assert_same_image(second, s.canvas.reference(), artifacts)
        assert panel.view.tokens[0][:3] == ["x", "y", "z"]


def test_host_fed_through_session_add(artifacts):
    with cv.Session(window=False, size=(240, 120)) as s:
        view = make_view("textgrid", margin_top=20)
        s.add(view, name="grid")
        view.set_data(np.full((2, 5), 0.25), tokens=[list("abcde"), list("fghij")])
        assert_same_image(s.render(), s.canvas.reference(), artifacts)
        img = s.flush()
        top = view.rect.y  # below the session's title bar
        assert tuple(img[top + 10, 200]) == BACKGROUND  # the margin stays free
        assert tuple(img[top + 30, 200]) != BACKGROUND  # the cells start below it
        view.set_data(np.full((2, 5), 0.75), tokens=[list("ABCDE"), list("FGHIJ")])
        assert_same_image(s.render(), s.canvas.reference(), artifacts)


def test_logit_lens_of_a_trained_tiny_model(artifacts):
    """The lens's last row is the model's own prediction; earlier rows use the same final
    layer norm and unembedding on earlier residual streams; the grid draws it exactly."""
    torch.manual_seed(0)
    text = "to be or not to be, that is the question. " * 40
    data = CharData(text)
    model = CharGPT(Config(vocab_size=len(data.vocab), n_layer=2, n_head=2, d_model=32, context=24))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    for _ in range(60):
        x, y = data.batch(16, 24, gen)
        loss = model.loss(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1.0  # the phrase repeats: the model has learned it
    probe = data.encode(text[:24])[None]
    with torch.no_grad():
        logits, residuals, attentions = model(probe, trace=True)
    top, ids = logit_lens(model, residuals)
    assert top.shape == ids.shape == (3, 24) and len(attentions) == 2
    final = torch.softmax(logits[0], -1)
    assert torch.equal(ids[-1], final.argmax(-1))
    assert torch.allclose(top[-1], final.max(-1).values, atol=1e-6)
    emb_only = torch.softmax(model.unembed(model.ln_f(residuals[0][0])), -1)
    assert torch.allclose(top[0], emb_only.max(-1).values, atol=1e-6)
    # the trained model predicts the repeated phrase from its last layer
    predicted = data.decode(ids[-1])
    assert sum(a == b for a, b in zip(predicted[:-1], text[1:24], strict=True)) >= 18
    assert ((top > 0) & (top <= 1)).all()
    view = TextGrid(top.numpy(), ids=ids, vocab=data.vocab, row_labels=["L0", "L1", "L2"],
                    col_labels=text[:24])
    assert_view_matches_twin(view, 420, 100, artifacts)


@pytest.mark.parametrize("name", ["long-tokens-clipped", "large-grid-colour-only", "one-d-row"])
def test_the_64_bit_path_draws_the_same_pixels(name, artifacts, monkeypatch):
    # a grid whose pixel-to-cell products pass 2^32 would need millions of cells: force the path
    from caliper_vk.views import textgrid

    monkeypatch.setattr(textgrid, "wide", lambda *products: 1)
    data, options, (w, h) = CASES[name]
    with Canvas(w, h) as canvas:
        view = TextGrid(data, **options)
        canvas.add(view)
        got = canvas.render()
        assert any(k[:2] == ("pipeline", "textgrid") and k[2] == ((0, 1),) for k in canvas.device.cache)
    want, _ = view.reference_with_stats(w, h)
    assert_same_image(got, want, artifacts)
