# Hardware CI, Windows + NVIDIA: a smoke test (at most a minute: the Vulkan device found by UUID,
# one CUDA tensor exported and imported, one frame of each view against its twin, a write racing a
# read), the byte-exact suite on the NVIDIA Vulkan device (trimmed by default: pytest -m trimmed;
# CALIPER_CI_SUITE=full for all of it), then the GPU path tests (tests/hardware, backend cuda,
# opaque-win32 memory + timeline semaphore: every view in every dtype zero-copy against the numpy
# twins, storage offsets, a racing producer and its negative control, the mirror, the
# another-device refusal), each under a deadline, and one summary line.
#
# Needs: an NVIDIA driver (it ships the Vulkan ICD), the Vulkan SDK (loader, validation layer,
# glslc, spirv-val on PATH), Python 3.10+. torch: the Python's own when it is a CUDA build (the venv
# then sees it), else the one from CALIPER_TORCH_INDEX; cuda-bindings from requirements-dev.txt.
# Every installed Vulkan ICD stays visible; the another-device refusal runs when a second device
# (e.g. Mesa's lavapipe) is installed and is reported as not applicable otherwise.
# CALIPER_CI_DEADLINE: seconds per pytest run (default 420 trimmed, 2400 full); CALIPER_CI_OUT:
# where the smoke test's report goes. Extra arguments go to pytest.
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")
if (-not $env:CALIPER_VK_DEVICE) { $env:CALIPER_VK_DEVICE = "nvidia" }
if (-not $env:CALIPER_VK_VALIDATION) { $env:CALIPER_VK_VALIDATION = "1" }
$NAME = "windows-cuda"
$suite = if ($env:CALIPER_CI_SUITE) { $env:CALIPER_CI_SUITE } else { "trimmed" }
$env:PYTHONUNBUFFERED = "1"
function Fail-Early($why) { Write-Output "${NAME}: FAILED before the tests: $why"; exit 2 }
$select = @()
if ($suite -eq "trimmed") { $select = @("-m", "trimmed"); $fallback = "420" }
elseif ($suite -eq "full") { $fallback = "2400" }
else { Fail-Early "CALIPER_CI_SUITE=${suite}: use trimmed or full" }
$deadline = if ($env:CALIPER_CI_DEADLINE) { $env:CALIPER_CI_DEADLINE } else { $fallback }
$smokeDeadline = "90"
$out = if ($env:CALIPER_CI_OUT) { $env:CALIPER_CI_OUT } else { Join-Path ([IO.Path]::GetTempPath()) "caliper-ci-$PID" }
New-Item -ItemType Directory -Force -Path $out | Out-Null
$log = Join-Path $out "pytest.log"

nvidia-smi --query-gpu=name,driver_version,uuid --format=csv
if ($LASTEXITCODE -ne 0) { Fail-Early "nvidia-smi failed: no NVIDIA driver" }
# the machine's own torch when it is a CUDA build: the venv sees it and pip does not replace it
$ErrorActionPreference = "Continue"
$ownTorch = (& python -c "import torch; print(torch.__version__ if torch.version.cuda else '')" 2>$null)
$ErrorActionPreference = "Stop"
$requirements = "requirements-dev.txt"
if ($ownTorch) {
    python -m venv --system-site-packages .venv
    $requirements = Join-Path $out "requirements-without-torch.txt"
    Get-Content requirements-dev.txt | Where-Object { $_ -notmatch '^torch==' } | Set-Content $requirements
    Write-Output "${NAME}: using this Python's own torch $ownTorch (a CUDA build)"
} else {
    python -m venv .venv
}
if ($LASTEXITCODE -ne 0) { Fail-Early "could not create .venv" }
$py = ".\.venv\Scripts\python"
& $py -m pip install -q -r $requirements
if ($LASTEXITCODE -ne 0) { Fail-Early "pip install -r $requirements failed" }
if ($env:CALIPER_TORCH_INDEX -and -not $ownTorch) {  # e.g. https://download.pytorch.org/whl/cu128
    & $py -m pip install -q --force-reinstall torch --index-url $env:CALIPER_TORCH_INDEX
    if ($LASTEXITCODE -ne 0) { Fail-Early "could not install torch from $env:CALIPER_TORCH_INDEX" }
}
& $py -m pip install -q --no-build-isolation --no-deps -e .
if ($LASTEXITCODE -ne 0) { Fail-Early "could not build caliper-vk (glslc on PATH?)" }
& $py -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA'; from cuda.bindings import driver as d; e, v = d.cuDriverGetVersion(); assert int(e) == 0, e"
if ($LASTEXITCODE -ne 0) { Fail-Early "torch has no CUDA or cuda-bindings finds no driver (CALIPER_TORCH_INDEX?)" }

function Summary($rc) { & $py ci/summary.py result $log $rc $deadline }  # pytest's last line, or why none
function Skips { (& $py ci/summary.py skips $log) -split ' ' | ForEach-Object { [int]$_ } }  # n/a, other
$ErrorActionPreference = "Continue"
# 1. the smoke test (`caliper doctor`'s report, then its checks and its summary line)
& $py ci/deadline.py $smokeDeadline -- $py -m caliper_vk.cli doctor --selftest --quick --require cuda --report (Join-Path $out "smoke.json") 2>&1 | Tee-Object -FilePath $log
$smokeRc = $LASTEXITCODE
$smokeLine = Select-String -Path $log -Pattern '^caliper smoke test: ' | Select-Object -Last 1
$smoke = if ($smokeRc -eq 124) { "TIMED OUT after ${smokeDeadline}s" } elseif ($smokeLine) { $smokeLine.Line -replace '^caliper smoke test: ', '' } else { "no result (rc=$smokeRc)" }
# 2. the byte-exact suite on the NVIDIA Vulkan device
& $py ci/deadline.py $deadline -- $py -m pytest -q -rs @select tests --ignore=tests/hardware @args 2>&1 | Tee-Object -FilePath $log
$exactRc = $LASTEXITCODE
$exact = Summary $exactRc
$exactNa, $exactOther = Skips
# 3. the GPU paths on CUDA (Win32 handles); any skip but "n/a on ..." is a failure
$env:CALIPER_HW_BACKENDS = "cuda"
$env:CALIPER_HW_SECOND_DEVICE = "optional"
& $py ci/deadline.py $deadline -- $py -m pytest -q -rs tests/hardware @args 2>&1 | Tee-Object -FilePath $log
$hwRc = $LASTEXITCODE
$hw = Summary $hwRc
$hwNa, $hwOther = Skips
$status = if ($smokeRc -eq 0 -and $exactRc -eq 0 -and $hwRc -eq 0 -and $hwOther -eq 0) { "PASSED" } else { "FAILED" }
$note = if ($hwOther -ne 0) { "; $hwOther skipped that must run here: see -rs above" } else { "" }
Write-Output ("${NAME}: $status | smoke test: $smoke | byte-exact suite ($suite) on $($env:CALIPER_VK_DEVICE): $exact " +
              "(skips: $exactNa n/a here, $exactOther other) | GPU paths (cuda, opaque-win32): $hw " +
              "(skips: $hwNa n/a here$note) | smoke report: $(Join-Path $out 'smoke.json')")
if ($status -ne "PASSED") { exit 1 }
