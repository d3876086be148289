#!/usr/bin/env bash
# Install what Caliper needs, idempotently. Sourced by tools/demo and tools/test.
#
#  - system packages (Debian/Ubuntu, only when missing and running as root):
#    the Vulkan loader, Mesa's Vulkan drivers (lavapipe), a GLSL compiler,
#    spirv-tools, the Khronos validation layer, Xvfb, GLFW, DejaVu fonts (the
#    dashboard's; the glyph atlas's font ships in the repository) and
#    Chromium (the browser tests of Session(window="web"));
#  - .venv/ with the pinned requirements-dev.txt and caliper-vk installed
#    editable (the build compiles the shaders to SPIR-V).
# Re-running is cheap: each step is skipped when already done.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

APT_PACKAGES=(libvulkan1 mesa-vulkan-drivers glslc spirv-tools vulkan-validationlayers
              vulkan-tools xvfb xauth libglfw3 x11-utils fonts-dejavu-core chromium)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "caliper: installing system packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    echo "caliper: missing system packages: ${missing[*]}" >&2
    echo "caliper: install them with: sudo apt-get install ${missing[*]}" >&2
  fi
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "caliper: creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=".venv/.caliper-installed"
want="$(cat requirements-dev.txt pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "caliper: installing Python dependencies into .venv (first run takes a few minutes)" >&2
  log=".venv/install.log"
  if ! { .venv/bin/python -m pip install --upgrade pip &&
         .venv/bin/python -m pip install -r requirements-dev.txt &&
         .venv/bin/python -m pip install --no-build-isolation --no-deps -e . ; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "caliper: installing Python dependencies failed; the full log is $ROOT/$log" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
# Built-in shaders: recompiled when a source or a generated header is newer than its SPIR-V (the views
# declare their passes as they are imported: the headers are generated from those declarations).
.venv/bin/python -c "import caliper_vk.views; from caliper_vk.engine import shaders
[shaders.load(p.stem) for p in shaders.sources()]"
