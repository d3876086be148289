#!/usr/bin/env bash
# Hardware CI, Linux + NVIDIA: the byte-exact suite on the NVIDIA Vulkan device, then the CUDA
# interop tests (opaque-fd memory + timeline semaphore), ending with a one-line summary.
#
# Installs nothing from the network. It uses the machine's Python (PYTHON, default python3,
# which must hold torch with CUDA; cuda-python is used when present) plus what is passed in:
#   CALIPER_CI_WHEELS  folder of wheels to add (default .whl): vulkan, glfw, cuda-python,
#                      pytest ... whatever the machine lacks; installed with --no-index --no-deps
#                      into a private folder, never into the system.
#   CALIPER_CI_DEBS    folder of .deb files unpacked into / when no Vulkan loader is found
#                      (default .gl: libvulkan1 etc.; needs root).
#   VK_DRIVER_FILES    the NVIDIA ICD json, when the loader does not find it by itself.
# CALIPER_VK_DEVICE is forced to the NVIDIA device, so a fallback to lavapipe fails instead
# of passing. Extra arguments go to both pytest runs.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
WHEELS="${CALIPER_CI_WHEELS:-.whl}"
DEBS="${CALIPER_CI_DEBS:-.gl}"
export CALIPER_VK_DEVICE="${CALIPER_VK_DEVICE:-nvidia}"
export PYTHONUNBUFFERED=1
die() { echo "linux-cuda: FAILED before the tests: $*"; exit 2; }

nvidia-smi --query-gpu=name,driver_version,uuid --format=csv || die "nvidia-smi not found: no NVIDIA driver"
if ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
    ls "$DEBS"/*.deb >/dev/null 2>&1 || die "no Vulkan loader (libvulkan.so.1) and no .deb files in $DEBS"
    for f in "$DEBS"/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
if [ -z "${VK_DRIVER_FILES:-}" ]; then
    for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
               /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; do
        if [ -f "$icd" ]; then export VK_DRIVER_FILES="$icd"; break; fi
    done
fi

SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl \
        || die "could not install the wheels in $WHEELS"
fi
# the package itself, built here (setup.py compiles the shaders: glslc or glslangValidator)
"$PY" -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" "$ROOT" \
    || die "could not build caliper-vk (is glslc or glslangValidator on PATH?)"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import vulkan, torch, numpy, pytest; assert torch.cuda.is_available(), 'torch sees no CUDA'" \
    || die "the Python environment lacks vulkan/torch/numpy/pytest or CUDA (pass wheels in $WHEELS)"
if "$PY" -c "import sys; from caliper_vk.engine.instance import validation_layer_available as v; sys.exit(not v())"; then
    export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-1}"
else
    export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-0}"
    echo "linux-cuda: no Khronos validation layer here; running without it"
fi
"$PY" -c "import cuda.bindings.driver" 2>/dev/null || echo "linux-cuda: cuda-python missing: the CUDA tests will skip"
"$PY" -m caliper_vk.cli doctor || die "caliper doctor failed (no NVIDIA Vulkan device?)"

LOG="$(mktemp)"
cd "$SITE"  # not the checkout: `import caliper_vk` must find the built package (with caliper_vk.engine)
# 1. the byte-exact suite on the NVIDIA Vulkan device (cwd: a temp folder, so the installed package is used)
"$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests" --ignore="$ROOT/tests/test_cuda_exporter.py" \
    --rootdir "$ROOT" "$@" 2>&1 | tee "$LOG"
exact_rc=${PIPESTATUS[0]}
exact="$(grep -E '^[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$LOG" | tail -1)"
# 2. CUDA interop: zero-copy, mirror, racing producer + negative control, UUID refusal, fd leaks
"$PY" -m pytest -q -rs -p no:cacheprovider "$ROOT/tests/test_cuda_exporter.py" \
    "$ROOT/tests/test_external_fd.py" --rootdir "$ROOT" "$@" 2>&1 | tee "$LOG"
cuda_rc=${PIPESTATUS[0]}
cudares="$(grep -E '(passed|failed|error).* in [0-9.]+s' "$LOG" | tail -1)"
skipped_hw="$(grep -c 'needs a CUDA GPU' "$LOG" || true)"
rm -f "$LOG"
status=PASSED
if [ "$exact_rc" -ne 0 ] || [ "$cuda_rc" -ne 0 ] || [ "$skipped_hw" -ne 0 ]; then status=FAILED; fi
note=""
[ "$skipped_hw" -ne 0 ] && note=" ($skipped_hw CUDA hardware tests skipped: torch or cuda-python saw no GPU)"
echo "linux-cuda: $status | byte-exact suite on $CALIPER_VK_DEVICE: ${exact:-no result} | CUDA interop: ${cudares:-no result}$note"
[ "$status" = PASSED ]
