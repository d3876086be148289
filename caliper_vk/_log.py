"""Caliper's diagnostics: the ``caliper_vk`` logger.

Library code never prints: what it has to say goes to ``logging.getLogger("caliper_vk")``, at
INFO for what happened (a URL to open, a file written) and WARNING for a degradation (a panel or
an output stopped, drawing stopped; training always goes on). By default the logger writes each
message as one ``caliper: ...`` line to the current ``sys.stderr``, the lines the README shows,
and does not propagate. To route them into your own logging instead::

    import logging
    log = logging.getLogger("caliper_vk")
    log.handlers.clear()
    log.propagate = True

and ``log.setLevel(logging.WARNING)`` keeps only the degradations; a logger configured before
Caliper is imported (a handler or a level set) is left as it is. The command line prints its
own one-line messages.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("caliper_vk")


class StderrLines(logging.Handler):
    """Each record as ``caliper: message`` on the ``sys.stderr`` of the moment (so a test's or a
    notebook's replacement of it sees the line)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"caliper: {record.getMessage()}\n")
        except Exception:  # a closed stream at exit: logging's own policy
            self.handleError(record)


# only where the application has not configured this logger itself (a handler or a level) first
if not logger.handlers and logger.level == logging.NOTSET:
    logger.addHandler(StderrLines())
    logger.setLevel(logging.INFO)
    logger.propagate = False
