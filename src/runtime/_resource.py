"""Canonical resources: the one form in which a resource meets a glob (SPEC §4, ADR 0009).

An agent picks its resource text, so a glob judged on that text as written
could be walked around: ``file:/data/public/../secret`` starts with
``file:/data/public/``. The gate therefore matches every resource glob against
``canonical_resource(action.resource)``, computed once per check:

* a leading ``scheme://authority`` is kept as written; otherwise the root is the
  text before the first ``/`` (``file:`` in ``file:/data``), so ``file:/../x``
  climbs above its root;
* repeated ``/`` collapse and a trailing ``/`` is dropped (``file:/data/`` is
  ``file:/data``, ``db:customers/`` is ``db:customers``, ``file:/`` is
  ``file:``; only the root directory ``/`` keeps its slash); ``.`` and ``..``
  segments are resolved;
* escapes of unreserved characters are decoded (``%41`` is ``A``), other escapes
  get uppercase hex; nothing else changes: case, scheme and authority stay
  as written, and ``db:customers`` or the empty resource are their own
  canonical form;
* a query or fragment is part of the text (``?`` and ``#`` are not special to
  a glob), but a ``.`` or ``..`` segment after a ``?`` or ``#`` is ambiguous.

Whatever could resolve differently for another reader — a ``..`` above the
root, a backslash, a percent-encoded or fullwidth ``.`` or ``/``, double
encoding, ``..;`` — raises `AmbiguousResource`, which the gate turns into a
recorded ``deny`` (the full list is in `runtime._paths`). Time is linear in the
length of the resource.
"""

from __future__ import annotations

from runtime._errors import AmbiguousResource
from runtime._paths import PathProblem, canonical_path

__all__ = ["canonical_resource"]


def canonical_resource(resource: str) -> str:
    """Return the canonical form of an action's resource, the text resource globs match.

    Args:
        resource: the action's resource (the snapshot's exact ``str``).

    Returns:
        The canonical text; a glob that matches it never admits a path outside
        the glob's literal directory, however the resource was written.

    Raises:
        AmbiguousResource: the resource is not a string, holds a control
            character or a lone surrogate, climbs above its root, or could be
            read differently by another reader (see the module docstring). The
            message never repeats the resource.
    """
    if type(resource) is not str:
        raise AmbiguousResource("is not a string")
    try:
        return canonical_path(resource, controls=True)
    except PathProblem as exc:
        raise AmbiguousResource(exc.problem) from None
