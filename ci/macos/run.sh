#!/usr/bin/env bash
# Hardware CI, macOS + Apple Silicon: a smoke test (at most a minute: one MPS tensor imported in
# place, one frame of each view against its twin, a write racing a read), the byte-exact suite on
# MoltenVK (trimmed by default: pytest -m trimmed; CALIPER_CI_SUITE=full for all of it), then the
# GPU path tests (tests/hardware, backend mps: every view in every dtype zero-copy against the numpy
# twins, storage offsets, a racing producer and its negative control), each under a deadline,
# ending with one summary line. CALIPER_CI_DEADLINE: seconds per pytest run (default 420 trimmed,
# 2400 full); CALIPER_CI_OUT: where the smoke test's report goes. Extra arguments go to pytest.
#
# Needs the Vulkan SDK (VULKAN_SDK) or Homebrew's vulkan-loader + molten-vk, glslang or shaderc,
# and a Python 3.10+ that is not /usr/bin/python3 (PYTHON, default Homebrew's python3).
#
# Finding the loader. The `vulkan` package dlopens the bare name "libvulkan.dylib", which dyld
# looks for in DYLD_LIBRARY_PATH, then DYLD_FALLBACK_LIBRARY_PATH (default /usr/local/lib and
# /usr/lib): not in /opt/homebrew/lib. This script runs under /bin/bash, which System Integrity
# Protection guards: DYLD_* variables given by the caller are stripped before its first line, and
# again whenever a protected binary (/usr/bin/python3, /usr/bin/env, /bin/sh) is started. So the
# variable is set here, after bash started, pointing at a private folder holding a
# "libvulkan.dylib" link to the loader found below, and Python is started directly from an
# unprotected path; its own subprocesses (sys.executable) inherit it. The import is checked
# before the tests.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
NAME="macos-metal"
SUITE="${CALIPER_CI_SUITE:-trimmed}"
die() { echo "$NAME: FAILED before the tests: $*"; exit 2; }
case "$SUITE" in
    trimmed) DEADLINE="${CALIPER_CI_DEADLINE:-420}"; SELECT=(-m trimmed) ;;
    full) DEADLINE="${CALIPER_CI_DEADLINE:-2400}"; SELECT=() ;;
    *) die "CALIPER_CI_SUITE=$SUITE: use trimmed or full" ;;
esac
SMOKE_DEADLINE=90
export CALIPER_VK_DEVICE="${CALIPER_VK_DEVICE:-apple}"
export CALIPER_VK_VALIDATION="${CALIPER_VK_VALIDATION:-0}"
export PYTHONUNBUFFERED=1
# Exact checks need MoltenVK's fast math off, and MoltenVK 1.3.0-1.4.1 need MTLHeap placement off
# for imported MTLBuffers to be read in place; the engine sets both too, unless the caller did.
export MVK_CONFIG_FAST_MATH_ENABLED=0
export MVK_CONFIG_USE_MTLHEAP="${MVK_CONFIG_USE_MTLHEAP:-0}"

BREW="$(brew --prefix 2>/dev/null || true)"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    for candidate in "$BREW/bin/python3" /opt/homebrew/bin/python3 /usr/local/bin/python3; do
        if [ -x "$candidate" ]; then PY="$candidate"; break; fi
    done
fi
[ -n "$PY" ] || die "no Python outside /usr/bin (brew install python, or set PYTHON)"
case "$(cd "$(dirname "$PY")" && pwd -P)" in
    /usr/bin|/bin|/System/*) die "$PY is SIP-protected: DYLD_LIBRARY_PATH would not reach it (set PYTHON)" ;;
esac

loader=""
for dir in "${VULKAN_SDK:+$VULKAN_SDK/lib}" "$(brew --prefix vulkan-loader 2>/dev/null || true)/lib" \
           "$BREW/lib" /usr/local/lib; do
    for name in libvulkan.dylib libvulkan.1.dylib; do
        if [ -n "$dir" ] && [ -e "$dir/$name" ]; then loader="$dir/$name"; break 2; fi
    done
done
[ -n "$loader" ] || die "no Vulkan loader (brew install vulkan-loader molten-vk, or set VULKAN_SDK)"
LIBDIR="$(mktemp -d)"
LOG="$(mktemp)"
OUT="${CALIPER_CI_OUT:-$(mktemp -d)}"
mkdir -p "$OUT" || die "cannot create $OUT"
trap 'rm -rf "$LIBDIR" "$LOG"' EXIT
# both names: the `vulkan` package opens libvulkan.dylib, GLFW libvulkan.1.dylib (GLFW is also given
# the engine's vkGetInstanceProcAddr, engine/loader.py: share_with_glfw, so both use this one loader)
ln -s "$loader" "$LIBDIR/libvulkan.dylib"
ln -s "$loader" "$LIBDIR/libvulkan.1.dylib"
export DYLD_LIBRARY_PATH="$LIBDIR${DYLD_LIBRARY_PATH:+:$DYLD_LIBRARY_PATH}"
if [ -z "${VK_DRIVER_FILES:-}" ]; then
    for icd in "${VULKAN_SDK:+$VULKAN_SDK/share/vulkan/icd.d/MoltenVK_icd.json}" \
               "$(brew --prefix molten-vk 2>/dev/null || true)/etc/vulkan/icd.d/MoltenVK_icd.json" \
               "$BREW/etc/vulkan/icd.d/MoltenVK_icd.json" "$BREW/share/vulkan/icd.d/MoltenVK_icd.json"; do
        if [ -n "$icd" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES="$icd"; break; fi
    done
fi
[ -n "${VK_DRIVER_FILES:-}" ] && export VK_ICD_FILENAMES="$VK_DRIVER_FILES"  # older loaders

"$PY" -m venv .venv || die "could not create .venv with $PY"
.venv/bin/python -m pip install -q -r requirements-dev.txt || die "pip install -r requirements-dev.txt failed"
.venv/bin/python -m pip install -q --no-build-isolation --no-deps -e . || die "could not build caliper-vk"
.venv/bin/python -c "import vulkan" \
    || die "the vulkan package cannot load $loader (DYLD_LIBRARY_PATH=$DYLD_LIBRARY_PATH)"
PY=.venv/bin/python
result() { "$PY" ci/summary.py result "$LOG" "$1" "$DEADLINE"; }  # pytest's last line, or why none
skips() { "$PY" ci/summary.py skips "$LOG"; }  # "N M": skips labelled "n/a on ...", and the others
# 1. the smoke test (its summary line first; `caliper doctor`'s report above it)
"$PY" ci/deadline.py "$SMOKE_DEADLINE" -- "$PY" -m caliper_vk.cli doctor --selftest --quick --require mps \
    --report "$OUT/smoke.json" 2>&1 | tee "$LOG"
smoke_rc=${PIPESTATUS[0]}
smoke="$(grep '^caliper smoke test:' "$LOG" | tail -1 | sed 's/^caliper smoke test: //')"
[ "$smoke_rc" -eq 124 ] && smoke="TIMED OUT after ${SMOKE_DEADLINE}s"
smoke="${smoke:-no result (rc=$smoke_rc)}"
# 2. the byte-exact suite on MoltenVK
"$PY" ci/deadline.py "$DEADLINE" -- "$PY" -m pytest -q -rs "${SELECT[@]}" tests \
    --ignore=tests/hardware "$@" 2>&1 | tee "$LOG"
exact_rc=${PIPESTATUS[0]}
exact="$(result "$exact_rc")"
read -r exact_na exact_other <<<"$(skips)"
# 3. the GPU paths on MPS; every test that applies must run here (any other skip is a failure)
CALIPER_HW_BACKENDS=mps "$PY" ci/deadline.py "$DEADLINE" -- "$PY" -m pytest -q -rs \
    tests/hardware "$@" 2>&1 | tee "$LOG"
hw_rc=${PIPESTATUS[0]}
hw="$(result "$hw_rc")"
read -r hw_na hw_other <<<"$(skips)"
status=PASSED
if [ "$smoke_rc" -ne 0 ] || [ "$exact_rc" -ne 0 ] || [ "$hw_rc" -ne 0 ] || [ "$hw_other" -ne 0 ]; then
    status=FAILED
fi
note=""
[ "$hw_other" -ne 0 ] && note="; $hw_other skipped that must run here: see -rs above"
echo "$NAME: $status | smoke test: $smoke | byte-exact suite ($SUITE) on $CALIPER_VK_DEVICE: $exact (skips: $exact_na n/a here, $exact_other other) | GPU paths (mps): $hw (skips: $hw_na n/a here$note) | smoke report: $OUT/smoke.json"
[ "$status" = PASSED ]
