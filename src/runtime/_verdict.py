"""The two closed vocabularies: what a rule says (`Effect`) and what the gate decides
(`RuntimeVerdict`). They are deliberately separate (ADR 0002): ``scrub`` is not an
effect (it comes from the scrubber) and ``approval`` is not a verdict (it yields
``pending``). Nothing here converts one into the other.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Effect", "RuntimeVerdict"]


class RuntimeVerdict(StrEnum):
    """The gate's outcome for one action, strongest first."""

    DENY = "deny"
    """The action must not take effect."""
    PENDING = "pending"
    """Held: it may take effect only after a human approves it."""
    NARROW = "narrow"
    """Permitted, scoped down: run it with the narrowed arguments."""
    SCRUB = "scrub"
    """Permitted, with secrets/PII removed from its arguments."""
    ALLOW = "allow"
    """Permitted as requested."""


class Effect(StrEnum):
    """What a policy rule asks for when it matches."""

    ALLOW = "allow"
    NARROW = "narrow"
    APPROVAL = "approval"
    DENY = "deny"
