"""Panels none of the runs shown has a sample of fold into one line ("not recorded in the run
shown (N panels): ...") instead of a "not recorded" panel each; a pinned panel, or a view where no
panel has data, is drawn as before."""

from __future__ import annotations

from caliper_vk.dashboard import app
from caliper_vk.runs import example_paths


def _children(dash, monkeypatch) -> tuple[list[str], list[str]]:
    """The panels' child windows a frame opened, and the texts it drew (after a frame that lays
    the panels out)."""
    dash.frame(events=[])
    dash.ui.discard_frame()
    names, texts = [], []
    begin, text = app.imgui.begin_child, app.imgui.text_colored
    monkeypatch.setattr(app.imgui, "begin_child", lambda name, *a: (names.append(name), begin(name, *a))[1])
    monkeypatch.setattr(app.imgui, "text_colored", lambda c, s, *a: (texts.append(s), text(c, s, *a))[1])
    try:
        dash.frame(events=[])
        dash.ui.discard_frame()
    finally:
        monkeypatch.setattr(app.imgui, "begin_child", begin)
        monkeypatch.setattr(app.imgui, "text_colored", text)
    return [n for n in names if n.startswith("panel") and n != "panels"], texts


def test_panels_of_hidden_runs_fold_into_one_line_and_a_pinned_one_is_drawn(monkeypatch):
    runs = app.open_runs(example_paths())
    dash = app.Dashboard(runs, size=(1200, 900), panels=["*"], shown=["digits_mlp"], columns=2)
    try:
        drawn, texts = _children(dash, monkeypatch)
        assert dash.folded, "the other runs' panels (the transformer's histograms, PSNR) fold"
        assert all(not dash._recorded(dash.panels[i]) for i in dash.folded)
        assert not {f"panel{i}" for i in dash.folded} & set(drawn)
        assert drawn and all(dash._recorded(dash.panels[int(n[5:])]) for n in drawn)
        (line,) = [t for t in texts if t.startswith("not recorded in the run shown (")]
        assert f"({len(dash.folded)} panels)" in line
        psnr = next(i for i in dash.folded if "val/psnr" in dash.panels[i].keys)
        assert "[dB]" in dash._unit_title(dash.panels[psnr])
        dash.pin_panel(psnr)  # pinned: drawn first, saying "not recorded" with its unit
        drawn, _ = _children(dash, monkeypatch)
        assert drawn[0] == f"panel{psnr}" and psnr not in dash.folded
    finally:
        dash.close()


def test_when_no_panel_has_data_each_says_so_in_its_own_panel(monkeypatch):
    runs = app.open_runs(example_paths())
    dash = app.Dashboard(runs, size=(900, 700), panels=["val/psnr"], shown=["digits_mlp"], columns=1)
    try:
        drawn, texts = _children(dash, monkeypatch)
        assert dash.folded == [] and len(drawn) == 1
        assert any(t.startswith("not recorded in the run shown: val/psnr") for t in texts)
    finally:
        dash.close()
