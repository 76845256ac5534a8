"""The installed ghost-sdk version, recorded in every run.

One source of truth: the ``version`` in pyproject.toml, as the installed
distribution's metadata carries it. ``runtime.__version__``,
``audit.__version__``, ``analysis.__version__`` and ``ghost --version`` all
read it from here or from the same metadata.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["SDK_VERSION"]


def _installed_version() -> str:
    try:
        return version("ghost-sdk")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


SDK_VERSION: Final[str] = _installed_version()
"""The installed ghost-sdk version (``"0+unknown"`` in a source tree never installed)."""
