"""Recording training runs: ``Recorder``, ``watch``, and reading runs back with ``load_run``.

The run format (an append-only log and ``run.json``) is documented in
``docs/run-format.md``.
"""

from .load import find_runs, load_run
from .log import RunFileError
from .recorder import Recorder, histogram_counts
from .run import ArrayFrame, ConfusionFrame, HistFrame, Run, Series
from .watch import Watcher, watch

__all__ = ["ArrayFrame", "ConfusionFrame", "HistFrame", "Recorder", "Run", "RunFileError", "Series", "Watcher",
           "find_runs", "histogram_counts", "load_run", "watch"]
