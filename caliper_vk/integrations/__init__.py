"""Caliper in one line for training frameworks: ``CaliperCallback`` for PyTorch Lightning
(:mod:`.lightning`) and for the Hugging Face ``Trainer`` (:mod:`.hf`).

Both attach probes (module outputs by name, attention maps, an embedding) to a
live session, draw after every optimizer step within the session's overhead
budget, and record the run (``Recorder`` + ``watch``) with the metrics the
trainer logs. The shared machinery is in :mod:`._probes`; nothing in the rest
of Caliper imports this package, and each module imports its framework lazily
enough that ``import caliper_vk`` never needs one.
"""

from ._bounds import Limits

__all__ = ["Limits"]
