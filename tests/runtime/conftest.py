"""Shared fixtures for runtime tests: a policy exercising every verdict, a gate on a memory sink."""

from __future__ import annotations

from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import Gate, Policy
from runtime.testing import ManualClock

POLICY: dict[str, Any] = {
    "policy_id": "test-policy",
    "default": "deny",
    "rules": [
        {"id": "never-delete", "verbs": ["delete"], "effect": "deny"},
        {
            "id": "refunds-need-approval",
            "verbs": ["refund"],
            "resources": ["payments:*"],
            "effect": "approval",
            "when": {"amount": {"gt": 50}},
            "approval": {"timeout_s": 600, "approvers": ["alice"]},
        },
        {
            "id": "small-refunds",
            "verbs": ["refund"],
            "resources": ["payments:*"],
            "effect": "allow",
        },
        {
            "id": "query-customers",
            "verbs": ["query"],
            "resources": ["db:customers"],
            "effect": "narrow",
            "narrow": {
                "clamp": {"limit": 100},
                "keep": ["table", "limit", "where", "read_only"],
                "set": {"read_only": True},
            },
        },
        {
            "id": "read-public",
            "verbs": ["read"],
            "resources": ["file:/data/public/**"],
            "effect": "narrow",
            "narrow": {"within": {"path": "/data/public"}},
        },
        {"id": "send-mail", "verbs": ["send"], "resources": ["mail:*"], "effect": "allow"},
        {"id": "search", "verbs": ["search"], "effect": "allow"},
    ],
    "scrub": {"block": ["private_key"]},
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(step_ns=1_000)


@pytest.fixture
def sink() -> MemoryAuditSink:
    return MemoryAuditSink()


@pytest.fixture
def gate(sink: MemoryAuditSink, clock: ManualClock) -> Gate:
    return Gate(Policy.from_dict(POLICY), sink=sink, clock=clock, fingerprint_key=b"k" * 32)
