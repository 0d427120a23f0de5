"""This tree's Python client (python/dlfs), not an installed one: a benchmark
measures the client of the tree it runs from.  `from benchlib.client import dlfs`."""
import os
import sys

from . import SRC

sys.path.insert(0, os.path.join(SRC, "python"))
import dlfs  # noqa: E402

__all__ = ["dlfs"]
