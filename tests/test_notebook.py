"""Session in Jupyter: a real notebook executed by nbclient on a real ipykernel."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

nbformat = pytest.importorskip("nbformat", reason="needs nbformat and nbclient (requirements-dev.txt)")
nbclient = pytest.importorskip("nbclient", reason="needs nbclient (requirements-dev.txt)")
pytest.importorskip("jupyter_rfb", reason="needs jupyter_rfb (the [notebook] extra)")

TRAIN = """
import numpy as np, torch

def train(session=None, steps=40):
    torch.manual_seed(0)
    x = torch.randn(64, 4); y = (x[:, :1] * 2 - x[:, 1:2]).clone()
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3), nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    emb = torch.zeros(64, 3)
    if session is not None:
        session.attach(emb, view="pointcloud", name="embedding", labels=torch.arange(64) % 4)
    for step in range(1, steps + 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if session is not None:
            with torch.no_grad():
                emb.copy_(model[:3](x))
            session.step(step)
    return [p.detach().clone() for p in model.parameters()], float(loss)
"""

LIVE = """
from caliper_vk.live import Session
session = Session(size=(200, 150))       # no window=: inside Jupyter it is the notebook widget
assert session.sinks.get("notebook") is not None and session.window is None
live_params, live_loss = train(session)
np.save({frame!r}, session.flush())
print(json.dumps({{"drawn_step": session.drawn_step, "frames": session.frames, "loss": live_loss}}))
"""

PLAIN = """
plain_params, plain_loss = train()
print(json.dumps({"same": all(torch.equal(a, b) for a, b in zip(live_params, plain_params)),
                  "loss": plain_loss}))
session.close()
"""


def test_notebook_widget_shows_the_last_drawn_step_and_training_is_unchanged(tmp_path):
    frame_path = tmp_path / "frame.npy"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import json\n" + TRAIN),
                nbformat.v4.new_code_cell(LIVE.format(frame=str(frame_path))),
                nbformat.v4.new_code_cell(PLAIN)]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    live = nb.cells[1].outputs
    printed = json.loads(next(o for o in live if o.output_type == "stream" and o.name == "stdout").text)
    assert printed["frames"] >= 1 and 1 <= printed["drawn_step"] <= 40
    # the widget's output: a live view for Jupyter, and the snapshot saved with the notebook
    shown = [o for o in live if o.output_type == "display_data"
             and "application/vnd.jupyter.widget-view+json" in o.data and "caliper" in o.data["text/plain"]]
    assert len(shown) == 1
    data = shown[0].data
    assert f"step {printed['drawn_step']}" in data["text/plain"]
    snapshot = np.asarray(Image.open(io.BytesIO(base64.b64decode(data["image/png"]))).convert("RGB"))
    drawn = np.load(frame_path)[..., :3]
    assert snapshot.shape == (150, 200, 3) and np.array_equal(snapshot, drawn)
    assert "data:image/png;base64," in data["text/html"]
    after = json.loads(next(o for o in nb.cells[2].outputs if o.output_type == "stream").text)
    assert after["same"] and after["loss"] == printed["loss"]  # drawing changed nothing in training
