"""Every float operation of a built-in exact view is NoContraction, and rounds to nearest-even.

A driver may fuse an undecorated multiply and add into one FMA (NVIDIA's compiler and Metal
do), which rounds once instead of twice and moves a curve row or a colour index by one. So
every shipped SPIR-V module of the exact views is read word by word here: any float multiply,
add, subtract, negate, divide or dot without the ``NoContraction`` decoration fails, and every
module that does float arithmetic declares ``RoundingModeRTE`` for 32-bit floats. The UI
overlay's shaders (Dear ImGui's vertices and colours) are outside the exact contract and
excluded by name.
"""

import numpy as np
import pytest

from caliper_vk.engine import limits, shaders
from caliper_vk.engine.instance import PhysicalDeviceInfo

OUTSIDE_THE_CONTRACT = {"overlay_vs", "overlay_fs"}
_OP_DECORATE, _NO_CONTRACTION = 71, 42
FLOAT_OPS = {127: "OpFNegate", 129: "OpFAdd", 131: "OpFSub", 133: "OpFMul", 136: "OpFDiv",
             140: "OpFRem", 141: "OpFMod", 142: "OpVectorTimesScalar", 143: "OpMatrixTimesScalar",
             144: "OpVectorTimesMatrix", 145: "OpMatrixTimesVector", 146: "OpMatrixTimesMatrix",
             148: "OpDot"}


def _instructions(spirv: bytes):
    words = np.frombuffer(spirv, dtype=np.uint32)
    assert words[0] == limits.SPIRV_MAGIC
    i = 5
    while i < len(words):
        op, count = int(words[i]) & 0xFFFF, int(words[i]) >> 16
        assert count > 0
        yield op, [int(w) for w in words[i + 1:i + count]]
        i += count


def float_ops(spirv: bytes) -> tuple[list, list]:
    """(every float arithmetic op, those without NoContraction) as (name, result id) pairs."""
    precise, ops = set(), []
    for op, operands in _instructions(spirv):
        if op == _OP_DECORATE and operands[1] == _NO_CONTRACTION:
            precise.add(operands[0])
        elif op in FLOAT_OPS:
            ops.append((FLOAT_OPS[op], operands[1]))  # operands: result type, result id, ...
    return ops, [o for o in ops if o[1] not in precise]


def rounds_to_nearest_even(spirv: bytes) -> bool:
    caps = modes = False
    for op, operands in _instructions(spirv):
        caps |= op == 17 and operands[0] == limits.CAP_ROUNDING_MODE_RTE
        modes |= op == 16 and operands[1:] == [limits.MODE_ROUNDING_MODE_RTE, 32]
    return caps and modes


def exact_stems() -> list[str]:
    return [p.stem for p in shaders.sources() if p.stem not in OUTSIDE_THE_CONTRACT]


@pytest.mark.parametrize("stem", exact_stems())
def test_exact_module_has_no_contractible_float_op(stem):
    spirv = shaders.load(stem)
    ops, loose = float_ops(spirv)
    assert loose == [], f"{stem}.spv: float ops without NoContraction (declare them precise): {loose}"
    if ops:
        assert rounds_to_nearest_even(spirv), f"{stem}.spv does float math without RoundingModeRTE"


def test_the_check_sees_undecorated_ops():
    # the overlay, excluded by name, has an undecorated multiply: the reader finds such ops
    assert float_ops(shaders.load("overlay_fs"))[1]
    assert set(exact_stems()) | OUTSIDE_THE_CONTRACT == {p.stem for p in shaders.sources()}


def test_the_old_curve_columns_fails(tmp_path):
    # the line before the fix assigned to a non-precise out parameter: 2 FMul/FAdd pairs left free
    src = (shaders.HERE / "curve_columns.comp").read_text()
    fixed = "    precise float r = ftz(ftz(a) + ftz(d * frac));\n    v = r;\n"
    assert fixed in src
    old = tmp_path / "curve_columns.comp"
    old.write_text(src.replace(fixed, "    v = ftz(ftz(a) + ftz(d * frac));\n"))
    import caliper_vk.views  # noqa: F401  (declares the curve's passes)

    shaders.generated_headers()
    shaders.compile_file(old, tmp_path / "old.spv")
    loose = float_ops((tmp_path / "old.spv").read_bytes())[1]
    assert sorted(name for name, _ in loose) == ["OpFAdd", "OpFAdd", "OpFMul", "OpFMul"]


def _info(rte: bool) -> PhysicalDeviceInfo:
    return PhysicalDeviceInfo(
        handle=None, index=0, name="fake", kind="cpu", api_version="1.2", api_version_int=0,
        driver_name="", driver_info="", vendor_id=0, device_uuid=bytes(16), extensions=frozenset(),
        timeline_semaphore=True, buffer_int64_atomics=False, max_storage_buffer_range=1 << 27,
        max_compute_workgroup_count=(65535, 65535, 65535), host_pointer_alignment=4096,
        features={limits.RTE_FEATURE: rte})


def test_a_device_without_the_rounding_mode_gets_it_removed(tmp_path):
    spirv = shaders.load("heatmap")
    assert limits.fit_rounding_mode(_info(True), spirv) is spirv
    fitted = limits.fit_rounding_mode(_info(False), spirv)
    assert not rounds_to_nearest_even(fitted)
    assert limits.CAP_ROUNDING_MODE_RTE not in limits.spirv_requirements(fitted)[0]
    assert float_ops(fitted) == float_ops(spirv)  # nothing else changed
    assert len(fitted) == len(spirv) - 4 * (2 + 4)  # OpCapability (2 words), OpExecutionMode (4)
    out = tmp_path / "fitted.spv"
    out.write_bytes(fitted)
    shaders.validate(out)  # spirv-val, when installed, accepts the fitted module
