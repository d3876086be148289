#!/usr/bin/env bash
# Hardware CI, Linux + NVIDIA: the byte-exact suite on the NVIDIA Vulkan device, then the GPU path
# tests (tests/hardware, backend cuda: every view in every dtype zero-copy against the numpy twins,
# storage offsets, VMM, a racing producer and its negative control, the mirror, the another-device
# refusal, fd leaks), each under a deadline, ending with one summary line.
#
# Installs nothing from the network. It uses the machine's Python (PYTHON, default python3,
# which must hold torch with CUDA) plus what is passed in:
#   CALIPER_CI_WHEELS  folder of wheels to add (default .whl): vulkan, glfw, cuda-bindings,
#                      cuda-pathfinder, pytest ... whatever the machine lacks; installed with
#                      --no-index --no-deps into a private folder, never into the system.
#   CALIPER_CI_DEBS    folder of .deb files unpacked into / when no Vulkan loader or no lavapipe
#                      is found (default .gl: libvulkan1, mesa-vulkan-drivers ...; needs root).
#   VK_DRIVER_FILES    the ICD jsons (colon-separated), when the loader does not find the NVIDIA
#                      one by itself; lavapipe's is added so the another-device test can run.
#   CALIPER_CI_DEADLINE  seconds each pytest run may take (default 2400); past it the run is
#                      killed (a stream deadlock) and the job fails with TIMED OUT.
# CALIPER_VK_DEVICE is forced to the NVIDIA device, so a fallback to lavapipe fails instead
# of passing. Extra arguments go to both pytest runs.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
PY="${PYTHON:-python3}"
WHEELS="${CALIPER_CI_WHEELS:-.whl}"
DEBS="${CALIPER_CI_DEBS:-.gl}"
DEADLINE="${CALIPER_CI_DEADLINE:-2400}"
export CALIPER_VK_DEVICE="${CALIPER_VK_DEVICE:-nvidia}"
export PYTHONUNBUFFERED=1
die() { echo "linux-cuda: FAILED before the tests: $*"; exit 2; }

nvidia-smi --query-gpu=name,driver_version,uuid --format=csv || die "nvidia-smi not found: no NVIDIA driver"
find_icd() {  # the first ICD json named $1 in the loader's usual folders
    local dir
    for dir in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d \
               /usr/local/nvidia/share/vulkan/icd.d; do
        if [ -f "$dir/$1" ]; then echo "$dir/$1"; return 0; fi
    done
    return 1
}
lvp_icd="$(find_icd "lvp_icd.$(uname -m).json" || find_icd lvp_icd.json || true)"
if ! ldconfig -p | grep -q 'libvulkan\.so\.1' || [ -z "$lvp_icd" ]; then
    if ls "$DEBS"/*.deb >/dev/null 2>&1; then
        for f in "$DEBS"/*.deb; do dpkg -x "$f" / || die "could not unpack $f"; done
        ldconfig
        lvp_icd="$(find_icd "lvp_icd.$(uname -m).json" || find_icd lvp_icd.json || true)"
    fi
fi
ldconfig -p | grep -q 'libvulkan\.so\.1' || die "no Vulkan loader (libvulkan.so.1) and no .deb files in $DEBS"
# The NVIDIA ICD, and lavapipe beside it: the another-device refusal needs a second device.
if [ -z "${VK_DRIVER_FILES:-}" ]; then
    nvidia_icd="$(find_icd nvidia_icd.json || true)"
    [ -n "$nvidia_icd" ] && export VK_DRIVER_FILES="$nvidia_icd${lvp_icd:+:$lvp_icd}"
elif [ -n "$lvp_icd" ] && [[ ":$VK_DRIVER_FILES:" != *":$lvp_icd:"* ]]; then
    export VK_DRIVER_FILES="$VK_DRIVER_FILES:$lvp_icd"
fi
[ -n "$lvp_icd" ] || echo "linux-cuda: lavapipe not found (mesa-vulkan-drivers): the another-device test will fail"
export VK_ICD_FILENAMES="${VK_DRIVER_FILES:-}"  # loaders older than 1.3.207 read this name
[ -n "$VK_ICD_FILENAMES" ] || unset VK_ICD_FILENAMES

SITE="$(mktemp -d)"
LOG="$(mktemp)"
trap 'rm -rf "$SITE" "$LOG"' EXIT
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
"$PY" -c "from cuda.bindings import driver as d; e, v = d.cuDriverGetVersion(); assert int(e) == 0, e" \
    || die "cuda-bindings is missing or finds no driver (pass cuda-bindings and cuda-pathfinder in $WHEELS)"
if "$PY" -c "import sys; from caliper_vk.engine.instance import validation_layer_available as v; sys.exit(not v())"; then
    export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-1}"
else
    export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-0}"
    echo "linux-cuda: no Khronos validation layer here; running without it"
fi
"$PY" -m caliper_vk.cli doctor || die "caliper doctor failed (no NVIDIA Vulkan device?)"

result() {  # pytest's last summary, or why there is none
    local rc="$1" line
    line="$(grep -E '(passed|failed|error|skipped).* in [0-9.]+s' "$LOG" | tail -1 | tr -d '=' | xargs)"
    if [ "$rc" -eq 124 ]; then echo "TIMED OUT after ${DEADLINE}s${line:+ ($line)}"; else echo "${line:-no result (rc=$rc)}"; fi
}
cd "$SITE" || exit 2  # not the checkout: `import caliper_vk` must find the built package (with caliper_vk.engine)
# 1. the byte-exact suite on the NVIDIA Vulkan device
"$PY" "$ROOT/ci/deadline.py" "$DEADLINE" -- "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests" \
    --ignore="$ROOT/tests/hardware" --rootdir "$ROOT" "$@" 2>&1 | tee "$LOG"
exact_rc=${PIPESTATUS[0]}
exact="$(result "$exact_rc")"
# 2. the GPU paths on CUDA; every test must run here (a skip is a failure)
CALIPER_HW_BACKENDS=cuda "$PY" "$ROOT/ci/deadline.py" "$DEADLINE" -- "$PY" -m pytest -q -rs \
    -p no:cacheprovider "$ROOT/tests/hardware" --rootdir "$ROOT" "$@" 2>&1 | tee "$LOG"
hw_rc=${PIPESTATUS[0]}
hw="$(result "$hw_rc")"
skipped="$(grep '^SKIPPED' "$LOG" | grep -vc 'n/a on' || true)"  # "n/a on": does not apply here
status=PASSED
if [ "$exact_rc" -ne 0 ] || [ "$hw_rc" -ne 0 ] || [ "$skipped" -ne 0 ]; then status=FAILED; fi
note=""
[ "$skipped" -ne 0 ] && note=" ($skipped GPU tests skipped; each must run here: see -rs above)"
echo "linux-cuda: $status | byte-exact suite on $CALIPER_VK_DEVICE: $exact | GPU paths (cuda): $hw$note"
[ "$status" = PASSED ]
