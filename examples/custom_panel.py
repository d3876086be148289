"""Custom panels beside a training loop: your own GLSL, drawn live, checked byte for byte.

Trains a small regression MLP for a few dozen steps and watches its first layer
through two custom panels:

- ``weights``: the weight matrix coloured by ``my_colour.glsl`` (a diverging
  map with a ``gain`` parameter), one cell per weight;
- ``agreement``: a raster function reading two inputs, the weights and their
  gradients: brightness is |w|, green where the next SGD step grows |w|,
  purple where it shrinks it.

Each panel has a numpy twin, and the final frame is compared with the twins
byte for byte. Runs headless and writes a PNG:

    .venv/bin/python examples/custom_panel.py --out out/custom_panel.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import caliper_vk as cv
from caliper_vk.shader_module import ShaderModule
from caliper_vk.views import _exact
from caliper_vk.views.custom import CustomPanel, to_unit

HERE = Path(__file__).resolve().parent
F32 = np.float32


def colour_twin(v, i, p):
    """numpy twin of my_colour.glsl: the same float32 operations in the same order."""
    finite = _exact.classify(v) == _exact.FINITE
    t = to_unit(np.where(finite, v, F32(0)), p) * F32(2) - F32(1)
    a = np.minimum(np.maximum(t * p["gain"], F32(-1)), F32(1))
    one = np.ones_like(a)
    blue = np.stack([one + a, one + a, one, one], axis=-1)
    red = np.stack([one, one - a, one - a, one], axis=-1)
    out = np.where((a < 0)[..., None], blue, red)
    return np.where(finite[..., None], out, np.array([1, 0, 1, 1], F32))


AGREEMENT = ShaderModule("""
// brightness |w| * gain; green where a descent step w - lr*g grows |w| (w and g of
// opposite signs), purple where it shrinks it; NaN/Inf anywhere: red
uvec4 shade(uvec2 px, uvec2 size) {
    uint row = (px.y * w_rows()) / size.y;
    uint col = (px.x * w_cols()) / size.x;
    float w = w_at(row, col);
    float g = g_at(row, col);
    if (classify(w) != CLASS_FINITE || classify(g) != CLASS_FINITE) return uvec4(255u, 0u, 0u, 255u);
    float m = ftz(abs(w) * gain);
    uint level = m >= 1.0 ? 255u : uint(ftz(m * 255.0));
    bool shrinks = ((floatBitsToUint(w) ^ floatBitsToUint(g)) >> 31) == 0u;
    return shrinks ? uvec4(level, level / 3u, level, 255u) : uvec4(level / 3u, level, level / 2u, 255u);
}
""")


def agreement_twin(inputs, p, width, height):
    """numpy twin of AGREEMENT's shade()."""
    w_all, g_all = inputs["w"], inputs["g"]
    py, px = np.mgrid[0:height, 0:width]
    row, col = (py * w_all.shape[0]) // height, (px * w_all.shape[1]) // width
    w, g = w_all[row, col], g_all[row, col]
    bad = (_exact.classify(w) != _exact.FINITE) | (_exact.classify(g) != _exact.FINITE)
    with np.errstate(all="ignore"):
        m = _exact.ftz(np.abs(w) * p["gain"])
        level = np.where(m >= 1, 255, _exact.ftz(m * F32(255)).astype(np.int64))
    shrinks = ((w.view(np.uint32) ^ g.view(np.uint32)) >> 31) == 0
    out = np.where(shrinks[..., None], np.stack([level, level // 3, level, 255 + 0 * level], -1),
                   np.stack([level // 3, level, level // 2, 255 + 0 * level], -1))
    out[bad] = (255, 0, 0, 255)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/custom_panel.png")
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = torch.sin(x[:, :4].sum(1, keepdim=True)) + 0.5 * x[:, 4:5]
    model = torch.nn.Sequential(torch.nn.Linear(16, 48), torch.nn.Tanh(), torch.nn.Linear(48, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    weight = model[0].weight
    torch.nn.functional.mse_loss(model(x), y).backward()  # .grad exists from here on

    weights = CustomPanel(color=ShaderModule.from_file(HERE / "my_colour.glsl"), params={"gain": 1.0},
                          value_range="symmetric", reference=colour_twin)
    agreement = CustomPanel(raster=AGREEMENT, inputs=("w", "g"), params={"gain": 2.5},
                            reference=agreement_twin)
    with cv.Session(window=False, size=(960, 420)) as session:
        panels = [session.attach(weight, view=weights, name="weights"),
                  session.attach({"w": weight, "g": weight.grad}, view=agreement, name="agreement")]
        for step in range(args.steps):
            with panels[0].writing(), panels[1].writing():  # no frame shows a half-written step
                opt.zero_grad(set_to_none=False)  # keep .grad's storage: the panel reads it in place
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            weights.set(gain=1.0 + step / args.steps)  # parameters change per frame
            session.step(step)
        frame = session.render()
        exact = np.array_equal(frame, session.canvas.reference())
        path = session.save_png(args.out)
        print(f"caliper: {args.steps} steps, loss {loss.item():.4f}")
        print(f"caliper: {session.status().line()}")
        print(f"caliper: frame byte-exact against the numpy twins: {exact}")
        print(f"caliper: wrote {path}")
    return 0 if exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
