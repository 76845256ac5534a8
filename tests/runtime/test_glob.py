"""Globs: names match whatever characters they hold, resources by segment, in linear time."""

from __future__ import annotations

import re
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import UnsupportedValue
from runtime._glob import GlobError, GlobSet
from tests.runtime.scaling import assert_linear
from tests.strategies import glob_segments

# --- an oracle written from SPEC §4, independent of the implementation --------------


def oracle_name(pattern: str, text: str) -> bool:
    """``*`` any run of characters, ``?`` one character, everything else literal."""

    @cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(text)
        if pattern[i] == "*":
            return match(i + 1, j) or (j < len(text) and match(i, j + 1))
        if j == len(text):
            return False
        return pattern[i] in ("?", text[j]) and match(i + 1, j + 1)

    return match(0, 0)


def oracle_resource(pattern: str, text: str) -> bool:
    """Segments split on ``/``; ``**`` any number of whole segments; a name glob within one."""
    globs, segments = pattern.split("/"), text.split("/")

    @cache
    def match(i: int, j: int) -> bool:
        if i == len(globs):
            return j == len(segments)
        if globs[i] == "**":
            return match(i + 1, j) or (j < len(segments) and match(i, j + 1))
        return j < len(segments) and oracle_name(globs[i], segments[j]) and match(i + 1, j + 1)

    return match(0, 0)


def names(*patterns: str, fast: bool = True) -> GlobSet:
    return GlobSet(patterns, resources=False, field="agent", fast=fast)


def resources(*patterns: str, fast: bool = True) -> GlobSet:
    return GlobSet(patterns, resources=True, field="resource", fast=fast)


# --- class 1: the defaults match every name and every resource -----------------------


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(
    "text", ["ops/cleaner", "fs/read", "", "a\nb", "é/ü", "*", "a/b/c/d", "x" * 5000]
)
def test_the_defaults_match_everything(text: str, fast: bool) -> None:
    assert names("*", fast=fast).matches(text)
    assert names("**", fast=fast).matches(text)
    assert resources("**", fast=fast).matches(text)


@given(st.text())
def test_a_star_name_glob_matches_any_valid_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate never reaches matching: the snapshot refuses it
    assert names("*").matches(text)
    assert names("*", fast=False).matches(text)
    assert resources("**").matches(text)
    assert resources("**", fast=False).matches(text)


# --- semantics, pinned --------------------------------------------------------------

NAME_CASES = [
    ("read", "read", True),
    ("read", "reads", False),
    ("read", "rea", False),
    ("ops/*", "ops/cleaner", True),
    ("ops/*", "ops/a/b", True),
    ("ops/*", "ops", False),
    ("ops-*", "ops-", True),
    ("ops-*", "xops-a", False),
    ("*-bot", "a/b-bot", True),
    ("*-bot", "a-bots", False),
    ("r?ad", "read", True),
    ("r?ad", "r/ad", True),
    ("r?ad", "rad", False),
    ("r?ad", "reead", False),
    ("?", "é", True),
    ("?", "", False),
    ("a*b*c", "abc", True),
    ("a*b*c", "aXbYc", True),
    ("a*b*c", "acb", False),
    ("a.c", "abc", False),
    ("a+", "aa", False),
    ("aX*", "ab", False),
    ("aX*", "aXb", True),
]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("pattern", "text", "expected"), NAME_CASES)
def test_name_globs(pattern: str, text: str, expected: bool, fast: bool) -> None:
    assert names(pattern, fast=fast).matches(text) is expected
    assert oracle_name(pattern, text) is expected


RESOURCE_CASES = [
    ("file:/data/public/**", "file:/data/public", True),
    ("file:/data/public/**", "file:/data/public/a", True),
    ("file:/data/public/**", "file:/data/public/a/b/c.txt", True),
    ("file:/data/public/**", "file:/data/publicity", False),
    ("file:/data/public/**", "file:/data", False),
    ("payments:*", "payments:stripe", True),
    ("payments:*", "payments:", True),
    ("payments:*", "payments:a/b", False),
    ("payments:*", "xpayments:a", False),
    ("mail:*", "mail:bob@example.com", True),
    ("file:/data/*", "file:/data/x", True),
    ("file:/data/*", "file:/data/x/y", False),
    ("*", "db:customers", True),
    ("*", "file:/x", False),
    ("*", "/x", False),
    ("*", "", True),
    ("db:customers", "db:customers", True),
    ("db:customers", "db:customers2", False),
    ("file:/data/?.txt", "file:/data/a.txt", True),
    ("file:/data/?.txt", "file:/data/ab.txt", False),
    ("file:/?", "file://", False),
    ("file:/data/*-*-*.csv", "file:/data/a-b-c.csv", True),
    ("file:/data/*-*-*.csv", "file:/data/a-b.csv", False),
    ("file:/data/*-*-*.csv", "file:/data/a-b/c-d.csv", False),
    ("**/secret", "secret", True),
    ("**/secret", "file:/a/b/secret", True),
    ("**/secret", "file:/a/b/secrets", False),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/b", "a/xb", False),
    ("https://*.example.com/**", "https://docs.example.com/x", True),
    ("https://*.example.com/**", "https://evil.com/x.example.com", False),
    ("/**", "", True),
    ("/**", "/a", True),
    ("/**", "a", False),
    ("file:/**", "file:", True),
    ("file:/**", "file:/", True),
    ("file:/**", "filex", False),
    # A subtree under a directory glob: the literal fast path must not take it.
    ("file:/d*/**", "file:/data/x", True),
    ("file:/d*/**", "file:/d", True),
    ("file:/d*/**", "file:/e/x", False),
    # `**` first and again later: only adjacent `**` segments fold into one.
    ("**/a/**", "x/a/y", True),
    ("**/a/**", "a", True),
    ("**/a/**", "x/b/y", False),
]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("pattern", "text", "expected"), RESOURCE_CASES)
def test_resource_globs(pattern: str, text: str, expected: bool, fast: bool) -> None:
    assert resources(pattern, fast=fast).matches(text) is expected
    assert oracle_resource(pattern, text) is expected


def test_a_list_matches_when_any_glob_does() -> None:
    globs = resources("db:orders", "file:/a/**", "mail:*", "file:/b/*.txt", "x/**/y")
    for text in ("db:orders", "file:/a/q", "mail:x", "file:/b/c.txt", "x/1/y"):
        assert globs.matches(text), text
    for text in ("db:order", "file:/ab", "mail:x/y", "file:/b/c.csv", "x/1/z"):
        assert not globs.matches(text), text
    assert not names("a", "b?", "c*").matches("d")
    assert names("a", "b?", "c*").matches("bz")


_NAME_ALPHABET = "ab/*?é"


@given(
    st.lists(st.text(alphabet=_NAME_ALPHABET, min_size=1, max_size=6), min_size=1, max_size=3),
    st.text(alphabet="ab/é\n*?", max_size=10),
)
def test_name_globs_agree_with_the_oracle_on_both_paths(patterns: list[str], text: str) -> None:
    expected = any(oracle_name(p, text) for p in patterns)
    assert names(*patterns).matches(text) is expected
    assert names(*patterns, fast=False).matches(text) is expected


@given(
    st.lists(
        st.lists(glob_segments(), min_size=1, max_size=4).map("/".join), min_size=1, max_size=3
    ),
    st.text(alphabet="ab/é\n", max_size=10),
)
def test_resource_globs_agree_with_the_oracle_on_both_paths(patterns: list[str], text: str) -> None:
    try:
        globs = resources(*patterns)
    except GlobError:
        return  # a pattern such as "a/**/**" is fine; one like "a**" is refused
    expected = any(oracle_resource(p, text) for p in patterns)
    assert globs.matches(text) is expected
    assert resources(*patterns, fast=False).matches(text) is expected


@given(st.lists(glob_segments(alphabet="ab*?:é"), min_size=1, max_size=5).map("/".join))
def test_well_formed_resource_globs_compile(pattern: str) -> None:
    if any("**" in s and s != "**" for s in pattern.split("/")):
        with pytest.raises(GlobError, match="whole segment"):
            resources(pattern)
    else:
        assert resources(pattern).patterns == (pattern,)


# --- what a malformed glob is -------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("", "non-empty string"),
        ("a**", "whole segment"),
        ("a/b**/c", "whole segment"),
        ("file:/data/../x", "canonical form"),
        ("file:/data/./x", "canonical form"),
        ("file:/data//x", "canonical form"),
        ("file:/data/", "write 'file:/data'"),
        ("file:/data/*/", "write 'file:/data/*'"),
        ("file:/data/%41", "write 'file:/data/A'"),
        ("file:/data/%c3%a9", "write 'file:/data/%C3%A9'"),
        ("file:/../x", "climbs above its root"),
        ("../x", "'.' or '..'"),
        ("file:/a\\b", "backslash"),
        ("file:/a/%2e%2e/b", "percent-encoded"),
        ("file:/a/%252e", "more than once"),
        ("file:/a/\uff0f", "compatibility form"),
        ("file:/a/..;/b", "dots and spaces"),
        ("x\ny", "control character"),
        ("x\ud800", "lone surrogate"),
    ],
)
def test_malformed_resource_globs_are_refused(pattern: str, message: str) -> None:
    with pytest.raises(GlobError, match=re.escape(message)) as info:
        resources(pattern)
    assert "could never match" in str(info.value) or message in str(info.value)


def test_a_refused_canonical_form_suggestion_keeps_the_wildcards() -> None:
    with pytest.raises(GlobError, match=r"write 'file:/\*\*/x\?'"):
        resources("file:/**//x?/")


@pytest.mark.parametrize("pattern", ["", "a\x00", "a\n", "a\x7f", "x\ud800"])
def test_malformed_name_globs_are_refused(pattern: str) -> None:
    with pytest.raises(GlobError):
        names(pattern)


def test_wildcards_are_not_dots_when_a_resource_glob_is_checked() -> None:
    # '.?' is a hidden entry of two characters, not the dot-like segment '.' + '?'.
    assert resources("file:/home/*/.?*").matches("file:/home/a/.ssh")
    assert repr(resources("a", "b/**")) == "GlobSet(['a', 'b/**'])"


def test_names_may_hold_any_printable_character() -> None:
    assert names("a/../b").matches("a/../b")
    assert names("a\\b").matches("a\\b")
    assert names("%2e").matches("%2e")


@pytest.mark.parametrize("patterns", [[], "abc", ()])
def test_a_glob_list_must_be_a_non_empty_list(patterns: object) -> None:
    with pytest.raises(GlobError, match="non-empty list"):
        GlobSet(patterns, resources=False, field="verb")  # type: ignore[arg-type]


def test_a_glob_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(GlobError, match="non-empty string"):
        names(5)  # type: ignore[arg-type]


def test_globs_too_large_for_re2_are_a_glob_error() -> None:
    with pytest.raises(GlobError, match="cannot be compiled: pattern too large"):
        names("?" * 100_000)


# --- defence in depth ---------------------------------------------------------------


@pytest.mark.parametrize("text", [5, b"read", None, ["read"]])
@pytest.mark.parametrize("fast", [True, False])
def test_a_text_that_is_not_a_str_is_an_evaluation_error(text: object, fast: bool) -> None:
    with pytest.raises(UnsupportedValue, match="argument agent is not a string"):
        names("read", fast=fast).matches(text)  # type: ignore[arg-type]


def test_a_str_subclass_is_refused_even_when_it_would_compare_equal() -> None:
    class Sly(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    with pytest.raises(UnsupportedValue):
        names("read").matches(Sly("write"))


def test_a_lone_surrogate_reaching_re2_is_an_evaluation_error() -> None:
    with pytest.raises(UnsupportedValue, match="not valid Unicode") as caught:
        names("a?b").matches("a\ud800b")
    assert caught.value.type_name == "str"
    assert not names("ab").matches("a\ud800b")  # the literal path needs no encoding


@pytest.mark.parametrize(
    ("patterns", "dialect"),
    [
        (["read", "write"], False),
        (["*"], False),
        (["***"], False),
        (["ops-*"], False),
        (["db:customers"], True),
        (["db:X"], True),
        (["**"], True),
        (["file:/data/public/**"], True),
        (["payments:*", "mail:*"], True),
        (["*"], True),
    ],
)
def test_the_common_shapes_never_reach_re2(patterns: list[str], dialect: bool) -> None:
    # Per-call cost: a string operation is a fraction of an RE2 call through its binding.
    globs = GlobSet(patterns, resources=dialect, field="verb")
    assert globs._regex is None
    assert GlobSet(patterns, resources=dialect, field="verb", fast=False)._regex is not None


@pytest.mark.parametrize(
    ("patterns", "dialect"),
    [(["r?ad"], False), (["*-bot"], False), (["a/**/b"], True), (["file:/*.csv"], True),
     (["X*Y"], True), (["a/*/b"], True)],
)  # fmt: skip
def test_other_shapes_go_to_re2(patterns: list[str], dialect: bool) -> None:
    assert GlobSet(patterns, resources=dialect, field="verb")._regex is not None


def test_literals_are_exposed_for_the_verb_index() -> None:
    assert names("read", "write").literals == frozenset({"read", "write"})
    assert names("read", "wr*").literals is None
    assert names("re?d").literals is None


# --- class 7: linear time, whatever the input ----------------------------------------

ADVERSARIAL = [
    # (dialect, pattern, text of size n): each defeats a backtracking matcher.
    (True, "file:/data/*-*-*.csv", lambda n: "file:/data/" + "-" * n),
    (True, "file:/data/*-*-*-*-*.csv", lambda n: "file:/data/" + "a-" * n + "x"),
    (True, "**/a/**/a/**/a/**/b", lambda n: "a/" * n + "c"),
    (True, "*/*/*/*/x", lambda n: "a" * n + "/b/c/d/y"),
    (True, "file:/data/**", lambda n: "file:/data/" + "a/" * n),
    (True, "payments:*", lambda n: "payments:" + "a" * n),
    (True, "db:" + "a" * 50, lambda n: "db:" + "a" * n),
    (False, "*a*a*a*a*b", lambda n: "a" * n),
    (False, "?*?*?*?*b", lambda n: "a" * n),
    (False, "ops-*", lambda n: "ops-" + "a" * n),
    (False, "*", lambda n: "a" * n),
]


@pytest.mark.parametrize(("dialect", "pattern", "make"), ADVERSARIAL)
@pytest.mark.parametrize("fast", [True, False])
def test_matching_is_linear_on_adversarial_input(
    dialect: bool, pattern: str, make: object, fast: bool
) -> None:
    globs = GlobSet([pattern], resources=dialect, field="resource", fast=fast)

    def run(text: str) -> None:
        for _ in range(10):
            globs.matches(text)

    # 4 KB, a snapshot's largest resource, against 40 KB: texts this size stay clear
    # of the allocator's switch to mmap, which would be measured instead of matching.
    assert_linear(run, make, 4_000)  # type: ignore[arg-type]
