"""Run a command with a deadline, for the hardware scripts (a stream deadlock must not hang a job).

    python ci/deadline.py SECONDS -- COMMAND [ARGS...]

Runs COMMAND in its own process group (POSIX) or process tree (Windows) and returns its exit
status; past SECONDS it kills the whole group, says so on stderr and exits 124 (as coreutils'
``timeout`` does; macOS and Windows lack that tool, every runner has Python).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

TIMED_OUT = 124


def run(seconds: float, command: list[str]) -> int:
    if os.name == "posix":
        proc = subprocess.Popen(command, start_new_session=True)
    else:
        proc = subprocess.Popen(command, creationflags=subprocess.CREATE_NEW_PROCESS_GROUP)
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        print(f"deadline: `{' '.join(command[:4])} ...` ran past {seconds:g} s (a stream deadlock?); "
              "killed with its children", file=sys.stderr, flush=True)
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True)
        proc.wait()
        return TIMED_OUT
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise


def main(argv: list[str]) -> int:
    if len(argv) < 3 or (argv[2] == "--" and len(argv) < 4):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    command = argv[3:] if argv[2] == "--" else argv[2:]
    return run(float(argv[1]), command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
