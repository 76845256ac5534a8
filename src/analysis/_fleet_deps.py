"""The optional extras the fleet commands stand on, imported only when a command runs.

``pyarrow`` and ``duckdb`` (``ghost-sdk[fleet]``) and ``ray``
(``ghost-sdk[ray]``) are never imported by ``runtime`` or ``audit``, nor by
``import analysis``: a handler asks for one with `load_extra`, which names
the extra to install when the module is missing. They are loaded as
untyped modules (``pyarrow`` ships no type information), and the modules
that use them keep their own values typed.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MissingExtraError", "load_extra"]


class MissingExtraError(Exception):
    """An optional dependency of a command is not installed; the message says how to get it.

    Attributes:
        module: the module that could not be imported (``pyarrow``).
        extra: the ghost-sdk extra that installs it (``fleet``).
    """

    def __init__(self, module: str, extra: str, cause: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(
            f"this command needs {module}, which is not installed ({cause}):"
            f" pip install 'ghost-sdk[{extra}]'"
        )


def load_extra(module: str, extra: str) -> Any:
    """Import ``module`` (an optional dependency) and return it.

    Args:
        module: the module's import name (``pyarrow.parquet``).
        extra: the ghost-sdk extra that provides it, for the error message.

    Raises:
        MissingExtraError: it cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            module.split(".")[0], extra, str(exc) or type(exc).__name__
        ) from None
