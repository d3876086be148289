# Hardware CI, Windows + NVIDIA: the byte-exact suite on the NVIDIA Vulkan device, then the GPU path
# tests (tests/hardware, backend cuda, opaque-win32 memory + timeline semaphore: every view in every
# dtype zero-copy against the numpy twins, storage offsets, a racing producer and its negative
# control, the mirror, the another-device refusal), each under a deadline, and one summary line.
#
# Needs: an NVIDIA driver (it ships the Vulkan ICD), the Vulkan SDK (loader, validation layer,
# glslc, spirv-val on PATH), Python 3.10+. The runner installs torch with CUDA (CALIPER_TORCH_INDEX)
# and cuda-bindings (requirements-dev.txt pins it). Every installed Vulkan ICD stays visible; the
# another-device refusal runs when a second device (e.g. Mesa's lavapipe) is installed and is
# reported as not applicable otherwise. CALIPER_CI_DEADLINE: seconds per pytest run (default 2400).
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")
if (-not $env:CALIPER_VK_DEVICE) { $env:CALIPER_VK_DEVICE = "nvidia" }
if (-not $env:CALIPER_VK_VALIDATION) { $env:CALIPER_VK_VALIDATION = "1" }
$deadline = if ($env:CALIPER_CI_DEADLINE) { $env:CALIPER_CI_DEADLINE } else { "2400" }
$env:PYTHONUNBUFFERED = "1"
function Fail-Early($why) { Write-Output "windows-cuda: FAILED before the tests: $why"; exit 2 }

nvidia-smi --query-gpu=name,driver_version,uuid --format=csv
if ($LASTEXITCODE -ne 0) { Fail-Early "nvidia-smi failed: no NVIDIA driver" }
python -m venv .venv
if ($LASTEXITCODE -ne 0) { Fail-Early "could not create .venv" }
$py = ".\.venv\Scripts\python"
& $py -m pip install -q -r requirements-dev.txt
if ($LASTEXITCODE -ne 0) { Fail-Early "pip install -r requirements-dev.txt failed" }
if ($env:CALIPER_TORCH_INDEX) {  # e.g. https://download.pytorch.org/whl/cu128
    & $py -m pip install -q --force-reinstall torch --index-url $env:CALIPER_TORCH_INDEX
    if ($LASTEXITCODE -ne 0) { Fail-Early "could not install torch from $env:CALIPER_TORCH_INDEX" }
}
& $py -m pip install -q --no-build-isolation --no-deps -e .
if ($LASTEXITCODE -ne 0) { Fail-Early "could not build caliper-vk (glslc on PATH?)" }
& $py -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA'; from cuda.bindings import driver as d; e, v = d.cuDriverGetVersion(); assert int(e) == 0, e"
if ($LASTEXITCODE -ne 0) { Fail-Early "torch has no CUDA or cuda-bindings finds no driver (CALIPER_TORCH_INDEX?)" }
& $py -m caliper_vk.cli doctor
if ($LASTEXITCODE -ne 0) { Fail-Early "caliper doctor failed (no NVIDIA Vulkan device?)" }

function Summary($out, $rc) {
    $line = ($out | Select-String -Pattern '(passed|failed|error|skipped).* in [0-9.]+s' | Select-Object -Last 1)
    $text = if ($line) { ($line.Line -replace '=', '').Trim() } else { "no result (rc=$rc)" }
    if ($rc -eq 124) { "TIMED OUT after ${deadline}s ($text)" } else { $text }
}
# 1. the byte-exact suite on the NVIDIA Vulkan device
$ErrorActionPreference = "Continue"
& $py ci/deadline.py $deadline -- $py -m pytest -q tests --ignore=tests/hardware @args 2>&1 | Tee-Object -Variable exactOut
$exact = $LASTEXITCODE
# 2. the GPU paths on CUDA (Win32 handles); any skip but "n/a on ..." is a failure
$env:CALIPER_HW_BACKENDS = "cuda"
$env:CALIPER_HW_SECOND_DEVICE = "optional"
& $py ci/deadline.py $deadline -- $py -m pytest -q -rs tests/hardware @args 2>&1 | Tee-Object -Variable hwOut
$hw = $LASTEXITCODE
$skipped = ($hwOut | Select-String -Pattern '^SKIPPED' | Where-Object { $_.Line -notmatch 'n/a on' }).Count
$status = if ($exact -eq 0 -and $hw -eq 0 -and $skipped -eq 0) { "PASSED" } else { "FAILED" }
$note = if ($skipped -ne 0) { " ($skipped GPU tests skipped; each must run here: see -rs above)" } else { "" }
Write-Output ("windows-cuda: $status | byte-exact suite on $($env:CALIPER_VK_DEVICE): $(Summary $exactOut $exact) " +
              "| GPU paths (cuda, opaque-win32): $(Summary $hwOut $hw)$note")
if ($status -ne "PASSED") { exit 1 }
