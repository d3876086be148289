#!/usr/bin/env bash
# Hardware CI, Linux + NVIDIA, sized for a GPU machine's 10 minutes: a smoke test (at most a
# minute: the Vulkan device found by UUID, one CUDA tensor exported and imported, one frame of each
# view against its twin, a write racing a read), then the trimmed byte-exact suite on the NVIDIA
# Vulkan device (pytest -m trimmed) and the GPU path tests (tests/hardware, backend cuda), each run
# under a deadline; one summary line at the end. See ci/linux-cuda/README.md.
#
#   CALIPER_CI_SUITE    trimmed (default) or full (the whole suite: 40 minutes and more)
#   CALIPER_CI_DRY_RUN  1: the same script end to end on any Vulkan device (lavapipe) with the CUDA
#                       parts skipped: no NVIDIA device required, the GPU path tests on the
#                       checked stand-in driver (tests/test_ci_scripts.py runs it in CI)
#   PYTHON              the Python to use (default python3); its own torch is used when it is a
#                       CUDA build, never replaced
#   CALIPER_CI_WHEELS   folder of wheels to add (default .whl): vulkan, glfw, cuda-bindings,
#                       cuda-pathfinder, pytest ...; installed with --no-deps into a private folder;
#                       a caliper_vk wheel there is used instead of building one (no glslc needed)
#   CALIPER_CI_DEBS     folder of .deb files unpacked into / when no Vulkan loader or no lavapipe is
#                       found (default .gl; needs root)
#   CALIPER_CI_OUT      folder for the smoke test's report (default: a new temporary folder)
#   CALIPER_CI_DEADLINE seconds each pytest run may take (default 420 trimmed, 2400 full)
#   CALIPER_CI_TESTS    the byte-exact suite's test paths (default tests/; the CI dry run names one)
#   VK_DRIVER_FILES     the ICD jsons, when the loader does not find the NVIDIA one by itself
# What a folder does not hold is installed from the registries (pip, apt-get as root) when they
# answer; offline, the script says what is missing. Extra arguments go to both pytest runs.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
PY="${PYTHON:-python3}"
WHEELS="$(cd "${CALIPER_CI_WHEELS:-.whl}" 2>/dev/null && pwd || echo "${CALIPER_CI_WHEELS:-.whl}")"
DEBS="${CALIPER_CI_DEBS:-.gl}"
SUITE="${CALIPER_CI_SUITE:-trimmed}"
DRY="${CALIPER_CI_DRY_RUN:-0}"
NAME="linux-cuda"
[ "$DRY" = 1 ] && NAME="linux-cuda (dry run)"
die() { echo "$NAME: FAILED before the tests: $*"; exit 2; }
case "$SUITE" in
    trimmed) DEADLINE="${CALIPER_CI_DEADLINE:-420}"; SELECT=(-m trimmed) ;;
    full) DEADLINE="${CALIPER_CI_DEADLINE:-2400}"; SELECT=() ;;
    *) die "CALIPER_CI_SUITE=$SUITE: use trimmed or full" ;;
esac
read -r -a TESTS <<<"${CALIPER_CI_TESTS:-tests}"
for i in "${!TESTS[@]}"; do [[ "${TESTS[$i]}" == /* ]] || TESTS[i]="$ROOT/${TESTS[$i]}"; done
SMOKE_DEADLINE=90  # the smoke test's checks take at most a minute; the rest is Python's start
export PYTHONUNBUFFERED=1
# ldconfig's cache is read whole, never piped into `grep -q` (which exits at the first match, so
# ldconfig dies of SIGPIPE and pipefail reports a missing loader)
has_loader() { local cache; cache="$(ldconfig -p 2>/dev/null)"; [[ "$cache" == *libvulkan.so.1* ]]; }
find_icd() {  # the first ICD json named $1 in the loader's usual folders
    local dir
    for dir in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d \
               /usr/local/nvidia/share/vulkan/icd.d; do
        if [ -f "$dir/$1" ]; then echo "$dir/$1"; return 0; fi
    done
    return 1
}
find_lvp() { find_icd "lvp_icd.$(uname -m).json" || find_icd lvp_icd.json || true; }

if [ "$DRY" = 1 ]; then
    echo "$NAME: CALIPER_CI_DRY_RUN=1: no NVIDIA GPU needed; the CUDA parts are skipped and the GPU path"
    echo "$NAME: tests run on the checked stand-in driver (tests/checked_cuda.py)"
else
    export CALIPER_VK_DEVICE="${CALIPER_VK_DEVICE:-nvidia}"  # a fallback to lavapipe fails, not passes
    nvidia-smi --query-gpu=name,driver_version,uuid --format=csv || die "nvidia-smi not found: no NVIDIA driver"
fi

# 1. the Vulkan loader and lavapipe: from CALIPER_CI_DEBS, else from apt when it answers
lvp_icd="$(find_lvp)"
if ! has_loader || [ -z "$lvp_icd" ]; then
    if ls "$DEBS"/*.deb >/dev/null 2>&1; then
        for f in "$DEBS"/*.deb; do dpkg -x "$f" / || die "could not unpack $f"; done
        ldconfig
    elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "$NAME: no Vulkan loader or lavapipe and no .deb files in $DEBS: trying apt-get"
        timeout 300 apt-get install -y -q --no-install-recommends libvulkan1 mesa-vulkan-drivers >/dev/null 2>&1 \
            || echo "$NAME: apt-get could not install libvulkan1 mesa-vulkan-drivers (offline?)"
    fi
    lvp_icd="$(find_lvp)"
fi
has_loader || die "no Vulkan loader (libvulkan.so.1): no .deb files in $DEBS and apt-get could not install libvulkan1"
# The NVIDIA ICD, and lavapipe beside it: the another-device refusal needs a second device.
if [ "$DRY" != 1 ]; then
    if [ -z "${VK_DRIVER_FILES:-}" ]; then
        nvidia_icd="$(find_icd nvidia_icd.json || true)"
        [ -n "$nvidia_icd" ] && export VK_DRIVER_FILES="$nvidia_icd${lvp_icd:+:$lvp_icd}"
    elif [ -n "$lvp_icd" ] && [[ ":$VK_DRIVER_FILES:" != *":$lvp_icd:"* ]]; then
        export VK_DRIVER_FILES="$VK_DRIVER_FILES:$lvp_icd"
    fi
    [ -n "$lvp_icd" ] || echo "$NAME: lavapipe not found (mesa-vulkan-drivers): the another-device test will fail"
    export VK_ICD_FILENAMES="${VK_DRIVER_FILES:-}"  # loaders older than 1.3.207 read this name
    [ -n "$VK_ICD_FILENAMES" ] || unset VK_ICD_FILENAMES
fi

# 2. Python packages, into a private folder: wheels first, then the registry for what is missing
SITE="$(mktemp -d)"
LOG="$(mktemp)"
OUT="${CALIPER_CI_OUT:-$(mktemp -d)}"
mkdir -p "$OUT" || die "cannot create $OUT"
trap 'rm -rf "$SITE" "$LOG"' EXIT
cd "$SITE" || exit 2  # never the checkout: `import caliper_vk` there finds the sources, without caliper_vk.engine
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip"
# the machine's torch when it is a CUDA build, read from torch/version.py (importing torch takes seconds)
machine_torch="$("$PY" - <<'EOF'
import importlib.util, pathlib, re
spec = importlib.util.find_spec("torch")
if spec and spec.origin:
    text = (pathlib.Path(spec.origin).parent / "version.py").read_text()
    cuda = re.search(r"^cuda(?::[^=]*)? = '([^']+)'", text, re.M)
    version = re.search(r"^__version__(?::[^=]*)? = '([^']+)'", text, re.M)
    print(version.group(1) if cuda and version else "")
EOF
)"
wheels=()
for w in "$WHEELS"/*.whl; do
    [ -e "$w" ] || continue
    case "$(basename "$w")" in torch-*) [ -n "$machine_torch" ] && continue ;; esac  # keep the CUDA build
    wheels+=("$w")
done
if [ ${#wheels[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "${wheels[@]}" \
        || die "could not install the wheels in $WHEELS"
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
needed="vulkan:vulkan glfw:glfw numpy:numpy PIL:pillow matplotlib:matplotlib tqdm:tqdm pytest:pytest torch:torch"
[ "$DRY" = 1 ] || needed="$needed cuda.bindings:cuda-bindings cuda.pathfinder:cuda-pathfinder"
missing() {  # the pip names of the modules in $needed that are not installed (found, not imported)
    "$PY" - "$needed" <<'EOF'
import importlib.util, sys
for pair in sys.argv[1].split():
    module, name = pair.split(":")
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is absent
        found = False
    if not found:
        print(name)
EOF
}
absent="$(missing | xargs)"
if [ -n "$absent" ]; then
    echo "$NAME: not in $WHEELS or $PY: $absent; trying the registry"
    # shellcheck disable=SC2086  # one pip name per word
    timeout 600 "$PY" -m pip install -q --disable-pip-version-check --timeout 15 --retries 0 --no-deps \
        --target "$SITE" $absent >/dev/null 2>&1 || true
    absent="$(missing | xargs)"
    [ -z "$absent" ] || die "missing Python packages: $absent (offline: pass their wheels in $WHEELS)"
fi
[ -n "$machine_torch" ] && echo "$NAME: using this Python's own torch $machine_torch (a CUDA build)"
# the package itself: a caliper_vk wheel among the wheels (built elsewhere: pip wheel --no-deps -w .whl .),
# else built here (setup.py compiles the shaders: glslc or glslangValidator)
prebuilt=("$WHEELS"/caliper_vk-*.whl)
if [ -e "${prebuilt[0]}" ]; then
    echo "$NAME: using the prebuilt ${prebuilt[0]##*/} (installed with the wheels above)"
else
    "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$SITE" "$ROOT" \
        >"$LOG" 2>&1 \
        || { cat "$LOG"; die "could not build caliper-vk (is glslc or glslangValidator on PATH? setuptools?)"; }
fi
where="$("$PY" -c 'import caliper_vk.engine, os; print(os.path.dirname(caliper_vk.__file__))' 2>&1)" \
    || die "the built package does not import: $where"
[ "$where" = "$SITE/caliper_vk" ] || die "caliper_vk imports from $where, not from the built package in $SITE"

# 3. CUDA and its Vulkan device (not in a dry run)
if [ "$DRY" != 1 ]; then
    "$PY" -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA'" \
        || die "torch ${machine_torch:-(not a CUDA build)} sees no CUDA device"
    "$PY" -c "from cuda.bindings import driver as d; e, v = d.cuDriverGetVersion(); assert int(e) == 0, e" \
        || die "cuda-bindings finds no driver (pass cuda-bindings and cuda-pathfinder in $WHEELS)"
    gap="$("$PY" -c "
from caliper_vk.engine import Instance
from caliper_vk.engine.icd import missing_nvidia_icd
with Instance(validation=False) as inst:
    print(missing_nvidia_icd(inst.physical_devices()) or '')" 2>&1)" || die "Vulkan finds no device: $gap"
    [ -z "$gap" ] || die "$gap"
fi
if "$PY" -c "import sys; from caliper_vk.engine.instance import validation_layer_available as v; sys.exit(not v())"; then
    export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-1}"
else
    export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-0}"
    echo "$NAME: no Khronos validation layer here; running without it"
fi

result() { "$PY" "$ROOT/ci/summary.py" result "$LOG" "$1" "$DEADLINE"; }  # pytest's last line, or why none
skips() { "$PY" "$ROOT/ci/summary.py" skips "$LOG"; }  # "N M": skips labelled "n/a on ...", and the others

# 4. the smoke test: a minute at most, its own summary line, its report kept in $OUT
require=(--require cuda)
[ "$DRY" = 1 ] && require=()
"$PY" "$ROOT/ci/deadline.py" "$SMOKE_DEADLINE" -- "$PY" -m caliper_vk.cli doctor --selftest --quick \
    "${require[@]}" --report "$OUT/smoke.json" 2>&1 | tee "$LOG"
smoke_rc=${PIPESTATUS[0]}
smoke="$(grep '^caliper smoke test:' "$LOG" | tail -1 | sed 's/^caliper smoke test: //')"
[ "$smoke_rc" -eq 124 ] && smoke="TIMED OUT after ${SMOKE_DEADLINE}s"
smoke="${smoke:-no result (rc=$smoke_rc)}"
# 5. the byte-exact suite (trimmed: -m trimmed) on the NVIDIA Vulkan device
"$PY" "$ROOT/ci/deadline.py" "$DEADLINE" -- "$PY" -m pytest -q -rs -p no:cacheprovider "${SELECT[@]}" \
    "${TESTS[@]}" --ignore="$ROOT/tests/hardware" --rootdir "$ROOT" "$@" 2>&1 | tee "$LOG"
exact_rc=${PIPESTATUS[0]}
exact="$(result "$exact_rc")"
read -r exact_na exact_other <<<"$(skips)"
# 6. the GPU paths on CUDA (in a dry run on the checked stand-in); every test must run (a skip
# other than "n/a on ..." is a failure)
backend=cuda
[ "$DRY" = 1 ] && backend=checked-cuda
CALIPER_HW_BACKENDS=$backend "$PY" "$ROOT/ci/deadline.py" "$DEADLINE" -- "$PY" -m pytest -q -rs \
    -p no:cacheprovider "$ROOT/tests/hardware" --rootdir "$ROOT" "$@" 2>&1 | tee "$LOG"
hw_rc=${PIPESTATUS[0]}
hw="$(result "$hw_rc")"
read -r hw_na hw_other <<<"$(skips)"
status=PASSED
if [ "$smoke_rc" -ne 0 ] || [ "$exact_rc" -ne 0 ] || [ "$hw_rc" -ne 0 ] || [ "$hw_other" -ne 0 ]; then
    status=FAILED
fi
note=""
[ "$hw_other" -ne 0 ] && note="; $hw_other skipped that must run here: see -rs above"
echo "$NAME: $status | smoke test: $smoke | byte-exact suite ($SUITE) on ${CALIPER_VK_DEVICE:-the default device}: $exact (skips: $exact_na n/a here, $exact_other other) | GPU paths ($backend): $hw (skips: $hw_na n/a here$note) | smoke report: $OUT/smoke.json"
[ "$status" = PASSED ]
