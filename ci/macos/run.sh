#!/usr/bin/env bash
# Hardware CI, macOS + Apple Silicon: the tier-2 byte-exact suite on MoltenVK.
#
# Needs: the Vulkan SDK or Homebrew's molten-vk + vulkan-loader + glslang/shaderc,
# Python 3.10+. MoltenVK devices are enumerated through
# VK_KHR_portability_enumeration, which the engine enables when present.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export CALIPER_VK_DEVICE="${CALIPER_VK_DEVICE:-apple}"
export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-0}"
# Exact checks need MoltenVK's fast math off (it would contract and reorder float ops).
export MVK_CONFIG_FAST_MATH_ENABLED=0
python3 -m venv .venv
.venv/bin/python -m pip install -q -r requirements-dev.txt
.venv/bin/python -m pip install -q --no-build-isolation --no-deps -e .
.venv/bin/caliper doctor
.venv/bin/python -m pytest -q tests "$@"
