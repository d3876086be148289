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
# Exact checks need MoltenVK's fast math off (it would contract and reorder float ops); the
# engine sets it too, before any Vulkan call, unless the environment already says otherwise.
export MVK_CONFIG_FAST_MATH_ENABLED=0
python3 -m venv .venv
.venv/bin/python -m pip install -q -r requirements-dev.txt
.venv/bin/python -m pip install -q --no-build-isolation --no-deps -e .
.venv/bin/caliper doctor
set +e
.venv/bin/python -m pytest -q tests --ignore=tests/test_mps_exporter.py "$@"
exact=$?
# Metal interop: MPS tensors imported through VK_EXT_metal_objects (must not skip here)
out="$(.venv/bin/python -m pytest -q -rs tests/test_mps_exporter.py "$@" 2>&1)"
metal=$?
echo "$out"
skipped=$(echo "$out" | grep -c "needs Apple Silicon with MPS")
status=PASSED
if [ $exact -ne 0 ] || [ $metal -ne 0 ] || [ "$skipped" -ne 0 ]; then status=FAILED; fi
echo "macos-metal: $status | byte-exact suite rc=$exact | Metal interop rc=$metal, hardware tests skipped: $skipped"
[ $status = PASSED ]
