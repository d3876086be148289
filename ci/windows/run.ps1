# Hardware CI, Windows + NVIDIA: the byte-exact suite on the NVIDIA Vulkan device, then the CUDA
# interop tests with Win32 handles (opaque-win32 memory + timeline semaphore), and a summary line.
#
# Needs: an NVIDIA driver (it ships the Vulkan ICD), the Vulkan SDK (loader, validation layer,
# glslc, spirv-val on PATH), Python 3.10+. The runner installs torch with CUDA and cuda-python
# (the workflow does; CI without a GPU never does).
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")
if (-not $env:CALIPER_VK_DEVICE) { $env:CALIPER_VK_DEVICE = "nvidia" }
if (-not $env:CALIPER_VK_VALIDATION) { $env:CALIPER_VK_VALIDATION = "1" }
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv
python -m venv .venv
.\.venv\Scripts\python -m pip install -q -r requirements-dev.txt
if ($env:CALIPER_TORCH_INDEX) {  # e.g. https://download.pytorch.org/whl/cu128
    .\.venv\Scripts\python -m pip install -q --force-reinstall torch --index-url $env:CALIPER_TORCH_INDEX
}
.\.venv\Scripts\python -m pip install -q cuda-python
.\.venv\Scripts\python -m pip install -q --no-build-isolation --no-deps -e .
.\.venv\Scripts\caliper doctor
.\.venv\Scripts\python -m pytest -q tests --ignore=tests/test_cuda_exporter.py @args
$exact = $LASTEXITCODE
.\.venv\Scripts\python -m pytest -q -rs tests/test_cuda_exporter.py @args | Tee-Object -Variable cudaOut
$cuda = $LASTEXITCODE
$skipped = ($cudaOut | Select-String "needs a CUDA GPU").Count
$status = if ($exact -eq 0 -and $cuda -eq 0 -and $skipped -eq 0) { "PASSED" } else { "FAILED" }
Write-Output "windows-cuda: $status | byte-exact suite rc=$exact | CUDA interop (opaque-win32) rc=$cuda, hardware tests skipped: $skipped"
if ($status -ne "PASSED") { exit 1 }
