"""``caliper doctor --selftest``: evidence from the user's own GPU, in a report they can attach.

The smoke test (``--quick``; the hardware scripts start with it, at most a minute) checks, on the
device Caliper picks and the best tensor backend of this machine (``cuda``, ``mps``, else ``cpu``):

- the Vulkan device is the GPU torch computes on, found by device UUID (CUDA);
- one tensor exported and imported in place (zero-copy), drawn equal to its numpy twin;
- one frame of each tensor view equal to its twin, byte for byte;
- a writer racing the renderer under the write/read protocol: no torn frame;
- with the Khronos validation layer on (``CALIPER_VK_VALIDATION=1``), none of its errors.

Each tensor is attached at zeros and written after attach, as training writes it, and its twin
is made from a ``.cpu()`` copy taken after the frame (pixels and counters), so a parameter
computed from a stale host copy fails.

The full self-test adds every view in every supported dtype, the host-fed views (text,
confusion) and a timing of each transfer path this machine has (host pointer, host staging,
CUDA zero-copy and on-device copy, MPS). :func:`run` returns a :class:`SelfTest`; ``write``
saves it as JSON plus a readable summary, with the user's home folder, user name and host name
replaced (:func:`scrub`), so the files can be attached to a bug report as they are.

A check that cannot run here is ``skipped`` with its reason; with ``require="cuda"`` (the CUDA
hardware scripts) a missing CUDA backend is a failure instead.
"""

from __future__ import annotations

import getpass
import json
import os
import platform
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
DTYPES = ("float32", "float16", "bfloat16", "int32", "uint8")
RACE_FRAMES = {True: 60, False: 300}  # quick, full
TIMED_FRAMES = 20
REPORT_VERSION = 1


@dataclass
class Check:
    name: str
    status: str
    detail: str
    seconds: float = 0.0


@dataclass
class SelfTest:
    kind: str  # "smoke test" or "self-test"
    backend: str
    device: str
    checks: list[Check] = field(default_factory=list)
    timings: list[dict] = field(default_factory=list)  # {path, view, shape, ms_per_frame}
    environment: dict = field(default_factory=dict)
    seconds: float = 0.0
    doctor: str = ""  # ``caliper doctor``'s report, when the CLI ran it

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.checks)

    @property
    def passed(self) -> bool:
        return self.count(FAILED) == 0 and self.count(PASSED) > 0

    def summary_line(self) -> str:
        first = next((c for c in self.checks if c.status == FAILED), None)
        why = f" | first failure: {first.name}: {first.detail}" if first else ""
        return (f"caliper {self.kind}: {'PASSED' if self.passed else 'FAILED'} | {self.count(PASSED)} passed, "
                f"{self.count(FAILED)} failed, {self.count(SKIPPED)} skipped | backend {self.backend} on "
                f"{self.device} | {self.seconds:.1f} s{why}")

    def text(self) -> str:
        lines = [self.summary_line(), ""]
        lines += [f"[{c.status:>7}] {c.name} ({c.seconds:.2f} s): {c.detail}" for c in self.checks]
        if self.timings:
            lines += ["", "Transfer paths (write + frame, median of "
                      f"{TIMED_FRAMES} frames):"]
            lines += [f"  {t['path']:<44} {t['view']} {t['shape']}: {t['ms_per_frame']:.3f} ms/frame"
                      for t in self.timings]
        lines += ["", "Environment:"] + [f"  {k}: {v}" for k, v in self.environment.items()]
        if self.doctor:
            lines += ["", "caliper doctor:", self.doctor]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(version=REPORT_VERSION, passed=self.passed, summary=self.summary_line())
        return d

    def write(self, path) -> tuple[Path, Path]:
        """Save ``PATH`` (JSON) and ``PATH`` with ``.txt`` (the summary), both scrubbed."""
        path = Path(path)
        if path.suffix != ".json":
            path = path.with_suffix(".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scrub(json.dumps(self.as_dict(), indent=2)) + "\n")
        txt = path.with_suffix(".txt")
        txt.write_text(scrub(self.text()) + "\n")
        return path, txt


def scrub(text: str) -> str:
    """``text`` without the home folder, user name or host name (a report is attached publicly)."""
    home = str(Path.home())
    if len(home) > 1:
        text = text.replace(home, "~")
    for secret, mask in ((_user(), "<user>"), (socket.gethostname(), "<host>")):
        if secret and len(secret) > 2:
            text = text.replace(secret, mask)
    return text


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name here (a container's uid without a passwd entry)
        return ""


def pick_backend(require: str | None = None) -> tuple[str, str]:
    """``(backend, why)``: cuda when torch has a CUDA device and cuda-bindings finds the driver,
    else mps, else cpu; ``require`` names one that must be used (a ``RuntimeError`` otherwise)."""
    import torch

    reasons = {}
    if torch.cuda.is_available():
        try:
            from .exporters import cuda

            cuda.driver()
            reasons["cuda"] = None
        except Exception as exc:
            reasons["cuda"] = f"cuda-bindings finds no driver ({exc}); pip install 'caliper-vk[cuda]'"
    else:
        reasons["cuda"] = f"torch {torch.__version__} sees no CUDA device"
    reasons["mps"] = None if torch.backends.mps.is_available() else "torch sees no MPS device"
    if require:
        if reasons.get(require):
            raise RuntimeError(f"the {require} backend was required but {reasons[require]}")
        return require, f"required ({require})"
    for name in ("cuda", "mps"):
        if reasons[name] is None:
            return name, f"{name} is available"
    return "cpu", f"no GPU backend: {reasons['cuda']}; {reasons['mps']}"


def tensor_views() -> dict[str, tuple[tuple[int, ...], tuple[int, int]]]:
    """View -> (sample shape, canvas size), for each registered view with a ``sample=``
    (``caliper_vk/views/_registry.py``): the views checked through each import path."""
    from .views import SPECS

    return {v: (spec.sample.shape, spec.sample.size) for v, spec in SPECS.items()
            if spec.sample and spec.sample.values is None}


def host_views() -> list[str]:
    """The registered views whose ``sample=`` gives fixed host values (checked host-fed)."""
    from .views import SPECS

    return [v for v, spec in SPECS.items() if spec.sample and spec.sample.values is not None]


def __getattr__(name: str):
    """``TENSOR_VIEWS`` (:func:`tensor_views`; tests/hardware/test_gpu_paths.py uses it too), made
    on first use: importing this module does not import the views (and Vulkan)."""
    if name == "TENSOR_VIEWS":
        return tensor_views()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sample(view: str, dtype: str, seed: int) -> np.ndarray:
    from .views import SPECS

    spec = SPECS[view].sample
    shape = spec.shape
    rng = np.random.default_rng(seed)
    if dtype == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if dtype == "int32":
        return rng.integers(-1000, 1000, shape, dtype=np.int32)
    values = rng.normal(size=shape).astype(np.float32) * 3
    if spec.nan_every:
        values.reshape(-1)[::spec.nan_every] = np.nan  # specials travel through the import too
    return values


def _sync(backend: str) -> None:
    import torch

    if backend == "cuda":
        torch.cuda.synchronize()
    elif backend == "mps":
        torch.mps.synchronize()


def _shared(backend: str, values: np.ndarray, dtype: str):
    """A tensor on ``backend`` that the renderer reads in place, all zero, and a function that
    writes ``values`` into it (under the panel's ``writing()``, after attach)."""
    import torch

    from .api import empty

    want = torch.from_numpy(values).to(getattr(torch, dtype))
    t = empty(values.shape, dtype=want.dtype, device=backend)
    t.zero_()
    _sync(backend)
    return t, lambda: t.copy_(want.to(t.device))


def _written_frame(session, panel, write) -> np.ndarray:
    """Write the panel's tensor after attach, as training does, and draw the frame."""
    session.step(0)
    session.flush()
    with panel.writing():
        write()
    session.step(1)
    return session.flush()


def _twin_diff(frame: np.ndarray, panel, tensor) -> str | None:
    """How the panel in ``frame`` differs from its view's twin made from a ``.cpu()`` copy of
    ``tensor`` taken after the frame (what the device read, not the copy made at attach), pixels
    and counters; None when it does not."""
    v, r = panel.view, panel.view.rect
    options = {"yaw_deg": v._yaw, "pitch_deg": v._pitch, "zoom": v.zoom} if hasattr(v, "_yaw") else {}
    twin = type(v)(**options)
    twin.set_data(tensor.cpu())
    want, stats = twin.reference_with_stats(r.width, r.height)
    bad = _same(frame[r.y:r.y + r.height, r.x:r.x + r.width], want)
    if bad is None and v.stats != stats:
        bad = f"the frame's counters {v.stats} differ from the twin's {stats}"
    return bad


def _same(got: np.ndarray, want: np.ndarray) -> str | None:
    if got.shape != want.shape:
        return f"shape {got.shape} != twin's {want.shape}"
    differ = (got != want).any(axis=2)
    if not differ.any():
        return None
    y, x = (int(v[0]) for v in np.nonzero(differ))
    return (f"{int(differ.sum())} of {differ.size} pixels differ from the numpy twin (first at ({y},{x}): "
            f"{tuple(got[y, x])} != {tuple(want[y, x])})")


class _Runner:
    def __init__(self, result: SelfTest, log):
        self.result, self.log = result, log

    def check(self, name: str, fn) -> None:
        """Run ``fn() -> (status, detail)``; an exception is a failure naming it."""
        start = time.perf_counter()
        try:
            status, detail = fn()
        except Exception as exc:
            status, detail = FAILED, f"{type(exc).__name__}: {exc}"
        check = Check(name, status, detail, time.perf_counter() - start)
        self.result.checks.append(check)
        if self.log:
            self.log(f"  [{status:>7}] {name}: {detail}")


def _device_check(backend: str, info) -> tuple[str, str]:
    from .engine.icd import missing_nvidia_icd

    gap = missing_nvidia_icd([info])
    if backend != "cuda":
        if gap:
            return FAILED, gap
        return SKIPPED, f"n/a on {backend}: the UUID match is CUDA's ({info.name}, {info.kind})"
    import torch

    from .exporters import cuda

    index = torch.cuda.current_device()
    uuid = cuda.Gpu.get(cuda.driver(), index).uuid
    if uuid != info.device_uuid:
        why = f"; {gap}" if gap else ""
        return FAILED, (f"cuda:{index} has UUID {uuid.hex()} but Caliper's Vulkan device {info.name} has "
                        f"{info.device_uuid.hex()}{why}")
    return PASSED, f"cuda:{index} is Vulkan's {info.name} (UUID {uuid.hex()})"


def _import_check(backend: str) -> tuple[str, str]:
    from . import Session

    t, write = _shared(backend, sample("heatmap", "float32", 1), "float32")
    with Session(window=False, size=(160, 120), budget=None) as s:
        panel = s.attach(t, "heatmap", name="x")
        kind = panel.record.kind if getattr(panel, "record", None) is not None else "?"
        bad = _twin_diff(_written_frame(s, panel, write), panel, t)
        path, reason = panel.path, panel.reason
    if bad:
        return FAILED, bad
    if path == "zero-copy":
        return PASSED, f"{backend} tensor imported as {kind}, zero-copy, frame equal to its twin"
    if backend == "cpu" and kind == "staging":  # a device without host import (MoltenVK, a profile)
        return SKIPPED, f"n/a on this device: {reason}; the frame, through host staging, equals its twin"
    return FAILED, f"{backend} tensor got {path}, not zero-copy: {reason}"


def _view_check(backend: str, view: str, dtype: str) -> tuple[str, str]:
    from . import Session
    from .views import SPECS

    values = sample(view, dtype, seed=len(view) * 7 + len(dtype))
    t, write = _shared(backend, values, dtype)
    size = SPECS[view].sample.size
    with Session(window=False, size=size, budget=None) as s:
        panel = s.attach(t, view, name="x")
        bad = _twin_diff(_written_frame(s, panel, write), panel, t)
        path = panel.path
    return (FAILED, bad) if bad else (PASSED, f"{path}: byte-exact against the twin")


def _host_view_check(kind: str) -> tuple[str, str]:
    import torch

    from . import Session
    from .views import SPECS

    spec = SPECS[kind]
    with Session(window=False, size=spec.sample.size, budget=None) as s:
        if isinstance(spec.sample.values, str):  # a text: added as a view
            s.add(spec.cls(spec.sample.values))
        else:  # rows of counts: attached as an int32 tensor
            s.attach(torch.tensor(spec.sample.values, dtype=torch.int32), kind, name=kind)
        bad = _same(s.render(), s.canvas.reference())
    return (FAILED, bad) if bad else (PASSED, "byte-exact against the twin")


def _race_check(backend: str, frames: int) -> tuple[str, str]:
    from . import Session
    from .api import empty

    t = empty((128, 256), device=backend)
    seen, errors = [], []
    with Session(window=False, size=(64, 64), max_fps=None, budget=None) as s:
        panel = s.attach(t, "heatmap", name="gen")
        done = threading.Event()

        def produce():
            try:
                gen = 0
                while not done.is_set():
                    gen += 1
                    with panel.writing():
                        for row in range(0, 128, 16):  # a write that takes a while
                            t[row:row + 16].fill_(float(gen))
            except Exception as exc:  # reported below
                errors.append(exc)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        last, bound = s.frames, time.monotonic() + 30  # a safety bound: a stuck stream fails
        try:
            while len(seen) < frames and time.monotonic() < bound and not errors:
                if not s.step():
                    time.sleep(0.0001)
                if s.frames != last:
                    last = s.frames
                    seen.append(panel.view.seen_range)
        finally:
            done.set()
            producer.join(timeout=30)
        if producer.is_alive():
            return FAILED, "the writer is stuck after 30 s (a stream deadlock?)"
        s.flush()
    if errors:
        return FAILED, f"the writer failed: {type(errors[0]).__name__}: {errors[0]}"
    torn = [r for r in seen if r[0] != r[1]]
    gens = len({r[0] for r in seen})
    if torn:
        return FAILED, f"{len(torn)} torn frames of {len(seen)} (first {torn[0]})"
    if len(seen) < frames:
        return FAILED, f"only {len(seen)} of {frames} frames in 30 s"
    return PASSED, f"{len(seen)} frames, none torn, {gens} distinct writes seen"


def _time_path(label: str, make, zero_copy: bool = True) -> dict:
    """Median ms for one write plus one frame of a 256x256 heatmap on one transfer path."""
    from . import Session

    t = make()
    times = []
    with Session(window=False, size=(128, 128), budget=None) as s:
        panel = s.attach(t, "heatmap", name="t", zero_copy=zero_copy)
        s.render()  # first-use work out of the timing
        for i in range(TIMED_FRAMES):
            start = time.perf_counter()
            with panel.writing():
                t.fill_(float(i))
            s.render()
            times.append(time.perf_counter() - start)
        path = panel.path
    return {"path": f"{label} ({path})", "view": "heatmap", "shape": list(t.shape),
            "ms_per_frame": round(float(np.median(times)) * 1000, 3)}


def _timings(backend: str) -> list[dict]:
    import torch

    from .api import empty

    shape = (256, 256)
    paths = [("cpu, caliper_vk.empty", lambda: empty(shape)),
             ("cpu, ordinary tensor, staged", lambda: torch.zeros(shape))]
    if backend == "cuda":
        paths += [("cuda, caliper_vk.empty", lambda: empty(shape, device="cuda")),
                  ("cuda, ordinary tensor", lambda: torch.zeros(shape, device="cuda"))]
    if backend == "mps":
        paths += [("mps tensor", lambda: torch.zeros(shape, device="mps"))]
    return [_time_path(label, make, zero_copy="staged" not in label) for label, make in paths]


def environment(info) -> dict:
    import torch

    from . import __version__

    env = {"caliper-vk": __version__, "python": platform.python_version(),
           "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
           "torch": torch.__version__, "torch cuda": torch.version.cuda or "none",
           "vulkan device": f"{info.name} ({info.kind}), driver {info.driver_name} {info.driver_info}, "
                            f"Vulkan {info.api_version}",
           "vulkan device uuid": info.device_uuid.hex()}
    if torch.cuda.is_available():
        env["cuda devices"] = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    for key in ("CALIPER_VK_DEVICE", "CALIPER_VK_PROFILE", "CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                "VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


def run(quick: bool = False, require: str | None = None, log=print) -> SelfTest:
    """The smoke test (``quick``) or the full self-test on this machine's device; see the module."""
    from .engine import default_device
    from .engine.instance import VALIDATION_LOG, validation_requested

    start = time.perf_counter()
    backend, why = pick_backend(require)
    info = default_device().info
    result = SelfTest(kind="smoke test" if quick else "self-test", backend=backend,
                      device=f"{info.name} ({info.kind})", environment=environment(info))
    result.environment["backend"] = why
    if log:
        log(f"caliper {result.kind}: backend {backend} ({why}) on {result.device}")
    runner = _Runner(result, log)
    errors_before = len(VALIDATION_LOG)
    runner.check("device found by UUID", lambda: _device_check(backend, info))
    runner.check(f"{backend} tensor exported and imported", lambda: _import_check(backend))
    for view in tensor_views():
        for dtype in DTYPES[:1] if quick else DTYPES:
            runner.check(f"{view} {dtype}", lambda v=view, d=dtype: _view_check(backend, v, d))
    if not quick:
        for kind in host_views():
            runner.check(f"{kind} (host-fed)", lambda k=kind: _host_view_check(k))
    runner.check("a write racing a read", lambda: _race_check(backend, RACE_FRAMES[quick]))
    if validation_requested():  # the hardware scripts turn the layer on: its errors fail the run
        new = VALIDATION_LOG[errors_before:]
        result.checks.append(Check("Khronos validation layer", FAILED if new else PASSED,
                                   f"{len(new)} errors; first: {new[0]}" if new else "on, no errors"))
    if not quick:
        try:
            result.timings = _timings(backend)
        except Exception as exc:  # the checks stand; say why the timings are missing
            result.checks.append(Check("timing of each path", FAILED, f"{type(exc).__name__}: {exc}"))
    result.seconds = time.perf_counter() - start
    return result
