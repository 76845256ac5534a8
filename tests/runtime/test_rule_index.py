"""The rule index: candidates by verb and resource prefix, never fewer than the matches."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, reject
from hypothesis import strategies as st

from runtime import AmbiguousResource, Policy, PolicyError, canonical_resource
from runtime._rule_index import RuleIndex, resource_prefix


@pytest.mark.parametrize(
    ("glob", "prefix"),
    [
        ("file:/data/**", "file:/data"),  # `**` matches no segment: file:/data itself
        ("file:/data/public/**", "file:/data/public"),
        ("mail:*", "mail:"),
        ("tool:t5/*", "tool:t5/"),  # `*` stays within its segment
        ("db:customers", "db:customers"),  # a literal is its own prefix
        ("**", ""),
        ("*", ""),
        ("a?b", "a"),
        ("x:/a/*b/c", "x:/a/"),
        ("x:/a/**/c", "x:/a"),
        ("x:/a/b?/**", "x:/a/b"),
        ("**/x", ""),
        ("s:/a?/b*", "s:/a"),
        ("s:/a*/b?", "s:/a"),  # the first wildcard cuts, whichever it is
    ],
)
def test_the_prefix_is_what_every_match_starts_with(glob: str, prefix: str) -> None:
    assert resource_prefix(glob) == prefix


_segment = st.sampled_from(["a", "b", "ab", "ba", "*", "a*", "*b", "?", "a?", "**", "**"])


def _loads(glob: str) -> bool:
    try:
        Policy.from_dict(
            {"policy_id": "p", "rules": [{"id": "r", "effect": "allow", "resources": [glob]}]}
        )
    except PolicyError:
        return False
    return True


_resource_glob = st.one_of(
    st.just("**"),
    st.builds(
        lambda scheme, parts: scheme + "/".join(parts),
        st.sampled_from(["s:/", "t:/", "s:"]),
        st.lists(_segment, min_size=0, max_size=4),
    ),
).filter(_loads)
_rule = st.fixed_dictionaries(
    {
        "verbs": st.lists(st.sampled_from(["read", "write", "*", "r*", "?ead"]), min_size=1),
        "resources": st.lists(_resource_glob, min_size=1, max_size=3),
        "agents": st.lists(st.sampled_from(["*", "bot", "b*"]), min_size=1, max_size=2),
    }
)
_resource = st.builds(
    lambda scheme, parts: scheme + "/".join(parts),
    st.sampled_from(["s:/", "s:", "t:/", "u:/"]),
    st.lists(st.sampled_from(["a", "b", "ab", "ba", "aab", "x"]), max_size=4),
)


def _instance(glob: str, data: st.DataObject) -> str:
    """A resource the glob may match: its wildcards filled, its `**` segments often empty."""
    parts: list[str] = []
    for segment in glob.split("/"):
        if segment == "**":
            parts.extend(data.draw(st.lists(st.sampled_from(["a", "b"]), max_size=2)))
            continue
        filled = segment.replace("*", data.draw(st.sampled_from(["", "a", "ab"])))
        parts.append(filled.replace("?", data.draw(st.sampled_from(["a", "b"]))))
    return "/".join(parts)


_ANY = {"verbs": ["*"], "agents": ["*"]}


@example([{**_ANY, "resources": ["s:/a/**"]}], "read", "bot", "s:/a", None)  # `**` as nothing
@example([{**_ANY, "resources": ["s:/a/**/b"]}], "read", "bot", "s:/a/b", None)
@example([{**_ANY, "resources": ["s:/a*"]}], "read", "bot", "s:/a", None)  # `*` as nothing
@given(
    st.lists(_rule, min_size=1, max_size=12),
    st.sampled_from(["read", "write", "other"]),
    st.sampled_from(["bot", "cat"]),
    _resource,
    st.data(),
)
def test_the_index_finds_exactly_what_a_scan_of_every_rule_finds(
    rules: list[dict[str, Any]],
    verb: str,
    agent: str,
    resource: str,
    data: st.DataObject | None,
) -> None:
    if data is not None and data.draw(st.booleans()):  # half the time, aim at a rule
        glob = data.draw(st.sampled_from([g for rule in rules for g in rule["resources"]]))
        resource = _instance(glob, data)
    spec = [{"id": f"r{i}", "effect": "allow", **rule} for i, rule in enumerate(rules)]
    try:
        policy = Policy.from_dict({"policy_id": "p", "rules": spec})
    except PolicyError:
        reject()  # a glob no canonical resource could match is refused at load
    try:
        canonical = canonical_resource(resource)
    except AmbiguousResource:
        reject()
    scanned = tuple(r for r in policy.rules if r.matches(agent, verb, canonical, {}))
    assert policy.matching_rules(agent, verb, resource, {}) == scanned
    candidates = RuleIndex(policy.rules).candidates(verb, canonical)
    assert set(scanned) <= set(candidates)
    assert list(candidates) == sorted(candidates, key=policy.rules.index)  # file order


def _many(count: int) -> Policy:
    rules: list[dict[str, Any]] = [
        {"id": f"r{i}", "resources": [f"tool:t{i}/*"], "effect": "allow"} for i in range(count)
    ]
    rules.append({"id": "search", "verbs": ["search"], "effect": "allow"})
    rules.append({"id": "t7-only", "resources": ["tool:t7/x"], "effect": "deny"})
    return Policy.from_dict({"policy_id": "p", "rules": rules})


def test_a_large_policy_yields_only_the_rules_that_could_match() -> None:
    index = RuleIndex(_many(2000).rules)
    # Resource prefixes rule out the 2,000 verb-less rules on other tools.
    assert [r.id for r in index.candidates("search", "tool:search")] == ["search"]
    assert [r.id for r in index.candidates("search", "tool:t7/x")] == ["r7", "search", "t7-only"]
    # tool:t70/x starts with tool:t7 too: a superset, never fewer (the glob decides).
    assert [r.id for r in index.candidates("other", "tool:t70/x")] == ["r70"]
    assert [r.id for r in index.candidates("other", "tool")] == []


def test_candidates_are_built_once_per_set() -> None:
    index = RuleIndex(_many(20).rules)
    assert index.candidates("search", "tool:t3/a") is index.candidates("search", "tool:t3/b")
    assert index.for_verb("search") is index.for_verb("search")


def test_the_cache_stays_bounded_under_ever_new_resources() -> None:
    index = RuleIndex(_many(4100).rules)
    for i in range(4096):  # 4,096 distinct candidate sets fill the cache exactly
        index.candidates("x", f"tool:t{i}/a")
    assert len(index._chosen) == 4096
    index.candidates("x", "tool:t4096/a")  # one more: it starts over
    assert len(index._chosen) == 1
    index.candidates("x", "tool:t0/a")
    assert len(index._chosen) == 2
    assert [r.id for r in index.candidates("x", "tool:t4099/a")] == ["r4099"]
