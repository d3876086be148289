"""Input messages from the page → :class:`~caliper_vk.engine.window.Event` records.

The page sends what the browser saw, in the frame's pixel coordinates:
``{"type": "move" | "drag" | "button" | "scroll" | "key" | "key_up" | "char", ...}``
with ``KeyboardEvent.code`` for keys. Keys get GLFW's key codes (what a
window's events carry, and what the dashboard's Dear ImGui backend maps), so
everything downstream handles them as a window's input.
"""

from __future__ import annotations

import math

from ..engine.window import Event

# KeyboardEvent.code → GLFW key code (GLFW uses ASCII for printable keys)
_NAMED = {
    "Space": 32, "Quote": 39, "Comma": 44, "Minus": 45, "Period": 46, "Slash": 47, "Semicolon": 59,
    "Equal": 61, "BracketLeft": 91, "Backslash": 92, "BracketRight": 93, "Backquote": 96,
    "Escape": 256, "Enter": 257, "Tab": 258, "Backspace": 259, "Insert": 260, "Delete": 261,
    "ArrowRight": 262, "ArrowLeft": 263, "ArrowDown": 264, "ArrowUp": 265, "PageUp": 266,
    "PageDown": 267, "Home": 268, "End": 269, "NumpadEnter": 335, "ShiftLeft": 340,
    "ControlLeft": 341, "AltLeft": 342, "MetaLeft": 343, "ShiftRight": 344, "ControlRight": 345,
    "AltRight": 346, "MetaRight": 347,
}
_NAMES = {"Space": "space", "Escape": "escape"}
KINDS = ("move", "drag", "button", "scroll", "key", "key_up", "char")


def glfw_code(code: str) -> int:
    """GLFW's key code for a ``KeyboardEvent.code`` (-1 when it has none)."""
    if code.startswith("Key") and len(code) == 4 and code[3].isalpha():
        return ord(code[3].upper())
    if code.startswith("Digit") and len(code) == 6 and code[5].isdigit():
        return ord(code[5])
    if code.startswith("F") and code[1:].isdigit() and 1 <= int(code[1:]) <= 25:
        return 289 + int(code[1:])
    return _NAMED.get(code, -1)


def _number(msg: dict, key: str) -> float:
    try:
        v = float(msg.get(key, 0.0))
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def event_from_message(msg: dict) -> Event | None:
    """The event a page message stands for, or None for anything malformed or unknown."""
    kind = msg.get("type")
    if kind not in KINDS:
        return None
    x, y = _number(msg, "x"), _number(msg, "y")
    mods = int(_number(msg, "mods")) & 0xF
    if kind in ("move", "drag", "scroll"):
        return Event(kind, x=x, y=y, dx=_number(msg, "dx"), dy=_number(msg, "dy"))
    if kind == "button":
        return Event("button", x=x, y=y, button=int(_number(msg, "button")) % 8,
                     down=bool(msg.get("down")), mods=mods)
    if kind == "char":
        text = str(msg.get("text", ""))[:1]
        return Event("char", text=text) if text else None
    code = str(msg.get("code", ""))[:32]
    glfw = glfw_code(code)
    name = _NAMES.get(code) or (chr(glfw).lower() if 33 <= glfw < 127 else "")
    return Event(kind, x=x, y=y, key=name, code=glfw, mods=mods)
