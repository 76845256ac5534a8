"""A Cedar policy with a schema or scrub settings attaches all of it: the run is self-contained."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("cedarpy", reason="the cedar extra (cedarpy) is not installed")

from analysis import ReplayStatus, replay_run
from audit import McapAuditSink, read_run
from runtime import (
    CEDAR_BUNDLE_MEDIA_TYPE,
    CEDAR_MEDIA_TYPE,
    Action,
    CedarPolicy,
    Gate,
    PolicyError,
)
from runtime._cedar_request import convention_request

TEXT = """
@id("search")
permit(principal, action == Action::"search", resource);
"""
SCHEMA = """
entity Agent;
entity Resource;
action "search" appliesTo { principal: Agent, resource: Resource, context: {} };
"""


def test_the_plain_text_is_attached_when_it_is_all_the_verdicts_depend_on() -> None:
    policy = CedarPolicy.from_str(TEXT, policy_id="p")
    assert policy.source == TEXT.encode()
    assert policy.source_media_type == CEDAR_MEDIA_TYPE


def test_scrub_settings_go_into_a_bundle_that_rebuilds_the_same_policy() -> None:
    policy = CedarPolicy.from_str(TEXT, policy_id="p", scrub={"block": ["private_key"]})
    assert policy.source_media_type == CEDAR_BUNDLE_MEDIA_TYPE
    again = CedarPolicy.from_bundle(policy.source)
    assert again.policy_sha256 == policy.policy_sha256
    assert again.scrub == policy.scrub


def test_a_run_under_a_cedar_policy_with_settings_replays_from_its_attachment(
    tmp_path: Path,
) -> None:
    policy = CedarPolicy.from_str(TEXT, policy_id="p", scrub={"max_depth": 20})
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        gate = Gate(policy, sink=sink, record_args="scrubbed")
        verdicts = [
            gate.check(Action("bot", verb, "tool:x", {"q": "a"})).verdict.value
            for verb in ("search", "delete")
        ]
    assert verdicts == ["allow", "deny"]
    (attached,) = read_run(path).attachments
    assert attached.media_type == CEDAR_BUNDLE_MEDIA_TYPE
    report = replay_run(path)  # the run's own policy, from the attachment alone
    assert [d.status for d in report.decisions] == [ReplayStatus.SAME] * 2


def test_a_bundle_that_names_a_mapping_needs_that_mapping() -> None:
    policy = CedarPolicy.from_str(TEXT, policy_id="p", mapping=convention_request)
    with pytest.raises(PolicyError, match="mapping"):
        CedarPolicy.from_bundle(policy.source)
    again = CedarPolicy.from_bundle(policy.source, mapping=convention_request)
    assert again.policy_sha256 == policy.policy_sha256


_FOREIGN = b'{"format":"toml","policy_id":"p","cedar":"","schema":null,"scrub":{},"mapping":null}'


@pytest.mark.parametrize("data", [b"", b"[]", b'{"format": "cedar"}', b"\xff", _FOREIGN])
def test_a_malformed_bundle_is_a_policy_error(data: bytes) -> None:
    with pytest.raises(PolicyError):
        CedarPolicy.from_bundle(data)


def test_a_schema_is_bundled_too() -> None:
    try:
        policy = CedarPolicy.from_str(TEXT, policy_id="p", schema=SCHEMA)
    except PolicyError as exc:  # the convention's entity types are the schema's to name
        pytest.fail(f"the test schema does not fit the convention: {exc}")
    assert policy.source_media_type == CEDAR_BUNDLE_MEDIA_TYPE
    assert CedarPolicy.from_bundle(policy.source).policy_sha256 == policy.policy_sha256
