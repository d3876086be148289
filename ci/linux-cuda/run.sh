#!/usr/bin/env bash
# Hardware CI, Linux + NVIDIA: the tier-2 byte-exact suite on the real GPU.
#
# Needs: an NVIDIA driver with Vulkan (nvidia-smi and the NVIDIA ICD), Python 3.10+.
# Runs the same suite as tools/test, with CALIPER_VK_DEVICE forcing the NVIDIA
# device so a fallback to lavapipe cannot pass silently, and prints
# `caliper doctor` first so the log names the device, driver and paths.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export CALIPER_VK_DEVICE="${CALIPER_VK_DEVICE:-nvidia}"
export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-1}"
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv || echo "nvidia-smi not found"
source tools/bootstrap.sh
.venv/bin/caliper doctor
.venv/bin/python -m pytest -q tests "$@"
