"""Library code says what it has to say through the ``caliper_vk`` logger, never print(): by
default one ``caliper: ...`` line on stderr; an application's own logging configuration wins."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {"caliper_vk/cli.py", "caliper_vk/runs/__main__.py"}  # commands print their own lines


def test_no_print_outside_the_commands():
    offenders = []
    for path in [*ROOT.glob("caliper_vk/**/*.py"), *ROOT.glob("engine/**/*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        if rel not in COMMANDS and re.search(r"^\s*print\(", path.read_text(encoding="utf-8"), re.M):
            offenders.append(rel)
    assert offenders == []


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


def test_by_default_a_message_is_one_caliper_line_on_stderr():
    out = run("from caliper_vk._log import logger\n"
              "logger.info('saved out.png'); logger.warning('panel x stopped: gone'); logger.debug('hidden')")
    assert out.stderr == "caliper: saved out.png\ncaliper: panel x stopped: gone\n" and out.stdout == ""


def test_an_applications_configuration_is_kept():
    out = run("import logging, sys\n"
              "logging.basicConfig(stream=sys.stdout, format='%(name)s %(levelname)s %(message)s')\n"
              "logging.getLogger('caliper_vk').setLevel(logging.WARNING)\n"
              "from caliper_vk._log import logger\n"
              "logger.info('saved out.png'); logger.warning('panel x stopped: gone')")
    assert out.stdout == "caliper_vk WARNING panel x stopped: gone\n" and out.stderr == ""
