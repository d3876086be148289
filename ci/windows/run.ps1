# Hardware CI, Windows + NVIDIA: the tier-2 byte-exact suite on the real GPU.
#
# Needs: an NVIDIA driver (it ships the Vulkan ICD), the Vulkan SDK (loader,
# validation layer, glslc, spirv-val on PATH), Python 3.10+.
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")
if (-not $env:CALIPER_VK_DEVICE) { $env:CALIPER_VK_DEVICE = "nvidia" }
if (-not $env:CALIPER_VK_VALIDATION) { $env:CALIPER_VK_VALIDATION = "1" }
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv
python -m venv .venv
.\.venv\Scripts\python -m pip install -q -r requirements-dev.txt
.\.venv\Scripts\python -m pip install -q --no-build-isolation --no-deps -e .
.\.venv\Scripts\caliper doctor
.\.venv\Scripts\python -m pytest -q tests @args
if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
