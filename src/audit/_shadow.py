"""Ghost's generic package names, checked where ghost's code first imports another (ADR 0029).

ghost-sdk installs three top-level packages, ``runtime``, ``audit`` and
``analysis``, side by side in one directory (ADR 0001). Their names are
generic, so another module of the same name can come first on ``sys.path``
(a ``runtime.py`` in the current directory, another distribution's
``audit`` package, an entry of ``PYTHONPATH``). Python then imports that
module in ghost's place, and the failure surfaces later as a puzzling
``ImportError: cannot import name ...`` or an ``AttributeError``.

So wherever one ghost package imports another (``audit`` imports
``runtime``; ``analysis`` imports both, and the ``ghost`` command is in
``analysis``), it first asks where the import system *would* find that name
-- without importing it, so a foreign module's code never runs -- and
raises `ShadowedPackageError`, an ``ImportError`` naming the module found
and how to fix it, unless the answer is the directory beside its own.

The same text is in ``audit/_shadow.py`` and ``analysis/_shadow.py`` (a
test keeps them identical): each package must be able to raise the error
when the other one is the package that is shadowed, so neither may import
it from the other. This module imports nothing of ghost's.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Final

__all__ = ["ShadowedPackageError", "require_ghost_package"]

_HOME: Final = Path(__file__).resolve().parent.parent
"""The directory ghost-sdk's packages are installed in, side by side."""

_DOCS: Final = "https://ghost-sdk.github.io/ghost/troubleshooting/"


class ShadowedPackageError(ImportError):
    """Another module of the same name comes before one of ghost-sdk's packages.

    Attributes:
        package: the top-level name (``runtime``, ``audit`` or ``analysis``).
        found: where the import system finds that name (a file or directory),
            or ``"nothing"``.
        expected: where ghost-sdk's own package is.
    """

    def __init__(self, package: str, found: str, expected: str) -> None:
        self.package = package
        self.found = found
        self.expected = expected
        super().__init__(
            f"ghost-sdk's package {package!r} is shadowed: `import {package}` finds {found}, "
            f"not ghost-sdk's {expected}. Rename or remove the other {package!r} module, or "
            f"put ghost-sdk's directory before it on sys.path (check PYTHONPATH and the "
            f"current directory); see {_DOCS}",
            name=package,
        )


def _location(package: str) -> str | None:
    """Where ``import package`` resolves (or resolved) to, without importing it."""
    module = sys.modules.get(package)
    spec = getattr(module, "__spec__", None) if module is not None else None
    if module is None:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
    if spec is None:
        file = getattr(module, "__file__", None)
        return None if file is None else str(file)
    locations = list(spec.submodule_search_locations or ())
    if len(locations) == 1:
        return str(locations[0])
    if locations:  # a namespace package spread over directories: never ghost's
        return ", ".join(str(location) for location in locations)
    return None if spec.origin is None else str(spec.origin)


def require_ghost_package(package: str) -> None:
    """Check that ``import package`` gives ghost-sdk's package, beside this one.

    Args:
        package: one of ghost-sdk's top-level package names.

    Raises:
        ShadowedPackageError: the name resolves anywhere else, or nowhere.
    """
    expected = _HOME / package
    found = _location(package)
    if found is not None and Path(found).resolve() == expected:
        return
    raise ShadowedPackageError(package, found or "nothing", str(expected))
