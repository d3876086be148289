"""Optional dependencies: one error type for a feature whose extra is not installed.

:class:`MissingExtraError` is an ``ImportError`` (code that catches that keeps working) whose
message names the feature and the ``pip install 'caliper-vk[EXTRA]'`` line; the CLI prints it as
one ``caliper: error:`` line with exit status 2 instead of a traceback.
"""

from __future__ import annotations


class MissingExtraError(ImportError):
    """A feature needs an optional package that is not installed; the message gives the fix."""

    def __init__(self, feature: str, package: str, extra: str):
        super().__init__(f"{feature} needs {package}: pip install 'caliper-vk[{extra}]'")
        self.package, self.extra = package, extra
