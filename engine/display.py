"""Where a window can open, and a display that goes away without taking the process with it.

:func:`window_refusal` decides, as a pure function of the platform, the thread, the window
server and the environment, whether a window may open; :func:`why_no_window` asks it for this
process and thread. macOS is the strict one: AppKit aborts the whole process (SIGABRT, not an
exception) when a window is made or its events are pumped off the main thread, so a window is
refused there before GLFW is touched; a login over SSH has no window server at all.

A lost display (the X server gone) must not end the process that trains: Xlib's default
fatal-I/O handler calls ``exit()``. :func:`_survive_display_loss` installs handlers on GLFW's
X11 connection that mark the display lost instead (:mod:`.window` then stops drawing).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
import threading


def window_refusal(platform: str, main_thread: bool, gui_session: bool, env) -> str | None:
    """Why no window can open here, or None when one can. A pure function of what it is given.

    ``platform`` is ``sys.platform``; ``main_thread`` whether the caller runs on the process's main
    thread; ``gui_session`` whether the process can reach a window server (macOS: a Quartz GUI
    session, not a login over SSH); ``env`` the environment (``DISPLAY``, ``WAYLAND_DISPLAY``).

    macOS is strict: AppKit aborts the whole process (SIGABRT, not an exception) when a window
    is made or its events are pumped off the main thread, so a window is refused there before
    GLFW is touched. Elsewhere GLFW accepts any one thread that keeps to itself.
    """
    if platform == "darwin":
        if not gui_session:
            return "no window server (a login over SSH, or no GUI session)"
        if not main_thread:
            return ("not on the main thread (macOS opens windows and pumps their events only there; "
                    "AppKit would abort the process)")
        return None
    if platform == "win32":
        return None
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        return "no display (DISPLAY and WAYLAND_DISPLAY are unset)"
    return None


@functools.lru_cache(maxsize=1)
def _macos_gui_session() -> bool:
    """Whether this process is in a Quartz GUI session: ``CGSessionCopyCurrentDictionary`` is
    documented to return NULL when the caller is not in one (a login over SSH) or the window
    server is disabled. True when CoreGraphics cannot be asked (GLFW then says what failed)."""
    try:
        cg = ctypes.CDLL(ctypes.util.find_library("CoreGraphics")
                         or "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics")
        cf = ctypes.CDLL(ctypes.util.find_library("CoreFoundation")
                         or "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation")
        cg.CGSessionCopyCurrentDictionary.restype = ctypes.c_void_p
        cf.CFRelease.argtypes = [ctypes.c_void_p]
    except (OSError, AttributeError):
        return True
    session = cg.CGSessionCopyCurrentDictionary()
    if not session:
        return False
    cf.CFRelease(session)
    return True


def why_no_window() -> str | None:
    """Why a window cannot open in this process and on this thread, or None (see :func:`window_refusal`)."""
    return window_refusal(sys.platform, threading.current_thread() is threading.main_thread(),
                          _macos_gui_session() if sys.platform == "darwin" else True, os.environ)


def display_available() -> bool:
    """True when a window could be opened here, on this thread (:func:`why_no_window` says why not)."""
    return why_no_window() is None


# X11 connections (Display* addresses) of GLFW that this module watches, and those lost.
_watched_displays: set[int] = set()
_lost_displays: set[int] = set()
_x11: dict = {}
_IO_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_IO_EXIT_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def _on_io_error(display):
    if display in _watched_displays:
        _lost_displays.add(display)
        return 0  # then the exit handler below, which returns: the process lives on
    previous = _x11.get("previous")
    return previous(display) if previous else 0  # other connections: Xlib's usual (exit)


def _on_io_exit(display, data):
    _lost_displays.add(display)


def _survive_display_loss(glfw) -> int | None:
    """Make a broken connection to GLFW's X server mark the display lost instead of ending
    the process (needs libX11 >= 1.7 for ``XSetIOErrorExitHandler``). Returns the watched
    ``Display*`` address, or None (not X11, or an older libX11: Xlib's behaviour stays)."""
    try:
        if glfw.get_platform() != glfw.PLATFORM_X11:
            return None
        display = ctypes.cast(glfw.get_x11_display(), ctypes.c_void_p).value
    except Exception:  # an older GLFW or pyGLFW, or a GLFW without X11
        return None
    if not display:
        return None
    if "lib" not in _x11:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
            lib.XSetIOErrorExitHandler.argtypes = [ctypes.c_void_p, _IO_EXIT_HANDLER, ctypes.c_void_p]
            lib.XSetIOErrorHandler.argtypes = [_IO_HANDLER]
            lib.XSetIOErrorHandler.restype = ctypes.c_void_p
        except (OSError, AttributeError):
            lib = None
        _x11["lib"] = lib
        if lib is not None:
            _x11["io"], _x11["exit"] = _IO_HANDLER(_on_io_error), _IO_EXIT_HANDLER(_on_io_exit)
            previous = lib.XSetIOErrorHandler(_x11["io"])
            _x11["previous"] = _IO_HANDLER(previous) if previous else None
    lib = _x11["lib"]
    if lib is None:
        return None
    if display not in _watched_displays:
        lib.XSetIOErrorExitHandler(display, _x11["exit"], None)
        _watched_displays.add(display)
    return display
