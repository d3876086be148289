"""The hardware tests import the suite's helpers (images.py, checked_cuda.py) from tests/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
