"""Textures the dashboard's UI shows: :class:`UITexture` (host pixels, or an engine canvas copied on
the GPU every frame) and the pixel helpers the renderer shares with it.

Made and owned by :class:`~caliper_vk.dashboard.imgui_backend.ImGuiRenderer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from imgui_bundle import imgui

from caliper_vk.engine.texture import Texture

if TYPE_CHECKING:
    from .imgui_backend import ImGuiRenderer


class UITexture(imgui.ImTextureRef):
    """A texture the UI shows: pass it to ``imgui.image(tex, tex.size)`` or ``implot.plot_image``.

    Made by :meth:`ImGuiRenderer.add_texture` (host pixels; :meth:`update`
    replaces them) or :meth:`ImGuiRenderer.add_canvas_texture` (a live engine
    canvas, copied on the GPU each frame). Owned by its renderer; ``close()``
    releases it earlier.
    """

    def __init__(self, renderer: ImGuiRenderer, texture: Texture, source=None):
        super().__init__(texture.id)
        self.renderer = renderer
        self.texture = texture
        self.source = source  # a Canvas (re-linked when it re-lays out) or an engine image

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` in pixels."""
        return self.texture.width, self.texture.height

    @property
    def id(self) -> int:
        return self.texture.id

    def update(self, pixels: np.ndarray, x: int = 0, y: int = 0) -> None:
        """Replace a rectangle (default: all) with ``(h, w, 4)`` or ``(h, w, 3)`` uint8 pixels."""
        if self.source is not None:
            raise ValueError("this texture shows a canvas; it cannot be updated from the host")
        self.texture.update(as_rgba(pixels), x, y)

    def _refresh(self, resize: bool) -> None:
        """Follow a canvas that replaced its image (a new layout).

        Called by ``new_frame`` (``resize=True``: a new size makes a new
        texture id, before the UI code uses it) and before drawing
        (``resize=False``: draw commands already hold the id, so a size change
        mid-frame shows the last contents once and is taken up next frame).
        """
        if self.source is None:
            return
        image = image_of(self.source)
        if image is None or getattr(image, "handle", None) is None:
            raise ValueError("a canvas texture's canvas was closed; add_canvas_texture() the new one, or "
                             "pass a function that returns the current canvas")
        if image is self.texture.source:
            return
        if (image.width, image.height) != self.size and not resize:
            self.texture.unlink()
            return
        if (image.width, image.height) != self.size:
            old = self.texture
            self.texture = Texture(old.device, image.width, image.height, filter=old.filter)
            self.renderer._textures.pop(old.id, None)
            self.renderer._textures[self.texture.id] = self.texture
            old.close()
            self._tex_id = self.texture.id
        self.texture.link(image)

    def close(self) -> None:
        if self.texture.handle is not None:
            self.renderer._textures.pop(self.texture.id, None)
            self.renderer._user.discard(self)
            self.texture.close()


def image_of(source):
    """The engine image behind a canvas texture's source (a canvas, an image, or a function of either)."""
    if callable(source):
        source = source()
    return getattr(source, "image", source)


def pixels_of(tex) -> np.ndarray:
    """An ImTextureData's pixels as ``(h, w, 4)`` or ``(h, w)`` uint8 (a view, no copy)."""
    flat = tex.get_pixels_array()
    shape = (tex.height, tex.width, 4) if tex.bytes_per_pixel == 4 else (tex.height, tex.width)
    return np.asarray(flat, dtype=np.uint8).reshape(shape)


def as_rgba(pixels) -> np.ndarray:
    """``pixels`` checked as ``(h, w, 4)`` uint8 (an opaque alpha added to ``(h, w, 3)``)."""
    a = np.asarray(pixels)
    if a.dtype != np.uint8:
        raise TypeError(f"texture pixels must be uint8, got {a.dtype} (scale and .astype(np.uint8) first)")
    if a.ndim == 3 and a.shape[2] == 3:
        a = np.concatenate([a, np.full((*a.shape[:2], 1), 255, np.uint8)], axis=2)
    if a.ndim != 3 or a.shape[2] != 4 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"texture pixels must be (h, w, 4) or (h, w, 3) uint8, got shape {a.shape}")
    return a
