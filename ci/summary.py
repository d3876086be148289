"""What the hardware scripts say about a pytest run, counted one way for bash and PowerShell.

    python ci/summary.py result LOG RC DEADLINE   pytest's last summary line, or why there is none
    python ci/summary.py skips LOG                "N M": skipped tests that do not apply here, others

A test that does not apply to a machine skips with a reason starting "n/a on" (tests/hardware's
rule, the NCCL test's on fewer than two GPUs); any other skip is one that should have run. pytest's
``-rs`` report groups equal reasons into one line, ``SKIPPED [COUNT] file:line: reason``, so the
count is the sum of the COUNTs, not the number of lines.
"""

from __future__ import annotations

import re
import sys

TIMED_OUT = 124
_SKIP = re.compile(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$")
_RESULT = re.compile(r"(passed|failed|error|skipped|deselected|no tests ran).* in [0-9.]+s")
NOT_APPLICABLE = "n/a on "


def skips(text: str) -> tuple[int, int]:
    """(skipped as not applicable here, skipped otherwise) in a pytest log with ``-rs``."""
    na = other = 0
    for line in text.splitlines():
        m = _SKIP.match(line.strip())
        if m:
            if m.group(2).startswith(NOT_APPLICABLE):
                na += int(m.group(1))
            else:
                other += int(m.group(1))
    return na, other


def result(text: str, rc: int, deadline: str) -> str:
    """pytest's last summary line (without its ``=`` rule), or why there is none."""
    lines = [ln.strip().strip("=").strip() for ln in text.splitlines() if _RESULT.search(ln)]
    line = lines[-1] if lines else ""
    if rc == TIMED_OUT:
        return f"TIMED OUT after {deadline}s" + (f" ({line})" if line else "")
    return line or f"no result (rc={rc})"


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[1] in ("skips", "result"):
        with open(argv[2], "rb") as f:
            raw = f.read()
        # Windows PowerShell 5.1's Tee-Object writes UTF-16 with a byte order mark
        text = raw.decode("utf-16" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8", errors="replace")
        if argv[1] == "skips":
            print(*skips(text))
            return 0
        if len(argv) == 5:
            print(result(text, int(argv[3]), argv[4]))
            return 0
    print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
