"""Canonical resources: traversal and encoding tricks never get a glob to admit them."""

from __future__ import annotations

import posixpath
import sys
import unicodedata
from collections.abc import Callable
from urllib.parse import unquote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from runtime import AmbiguousResource, EvaluationError, _paths, canonical_resource
from runtime._glob import GlobSet
from tests.runtime.scaling import assert_linear
from tests.strategies import path_texts

CANONICAL = [
    # (resource, canonical form)
    ("file:/data/public/../secret", "file:/data/secret"),
    ("file:/data/public//../secret", "file:/data/secret"),
    ("file:/data/public/../../etc/shadow", "file:/etc/shadow"),
    ("file:/data/./public/./x", "file:/data/public/x"),
    ("file:/data//public///x", "file:/data/public/x"),
    ("file:/data/public/", "file:/data/public"),
    ("file:/data/public/x/..", "file:/data/public"),
    ("file:/data/..", "file:"),
    ("file:/", "file:"),
    ("file:", "file:"),
    ("db:customers/", "db:customers"),
    ("db:customers", "db:customers"),
    ("mail:bob@example.com", "mail:bob@example.com"),
    ("", ""),
    ("/", "/"),
    ("//", "/"),
    ("/a/..", "/"),
    ("//etc//passwd", "/etc/passwd"),
    ("relative/./path/", "relative/path"),
    ("db:customers/x/..", "db:customers"),
    # scheme://authority is kept as written; the path after it is resolved
    ("https://h//a/./b/", "https://h/a/b"),
    ("https://h", "https://h"),
    ("https://h/", "https://h"),
    ("file:///", "file://"),
    ("file:///etc/passwd", "file:///etc/passwd"),
    ("HTTPS://Host:8080/a/../b", "HTTPS://Host:8080/b"),
    # the query is text: '?' and '#' are not special, except for dot segments after them
    ("https://h/a?x=1/y", "https://h/a?x=1/y"),
    ("https://h/a?x=1//y", "https://h/a?x=1/y"),
    ("https://h/?q=a", "https://h/?q=a"),
    ("https://h/a/../b?q", "https://h/b?q"),
    # escapes of unreserved characters are decoded, others get uppercase hex
    ("file:/d/%41%7e%2D%5f", "file:/d/A~-_"),
    ("file:/d/caf%c3%a9", "file:/d/caf%C3%A9"),
    ("file:/d/a%20b", "file:/d/a%20b"),
    ("search:50% off", "search:50% off"),
    ("search:100%", "search:100%"),
    ("file:/d/%25", "file:/d/%25"),
    # dots inside a segment are ordinary
    ("file:/d/.hidden/a..b/x.", "file:/d/.hidden/a..b/x."),
    ("file:/d/x\u2026y", "file:/d/x\u2026y"),
    ("file:/d/\uff41\uff38", "file:/d/\uff41\uff38"),  # fullwidth 'aX': lookalikes, not separators
    ("file:/d/.X/ X/x;.", "file:/d/.X/ X/x;."),
]


@pytest.mark.parametrize(("resource", "expected"), CANONICAL)
def test_canonical_forms(resource: str, expected: str) -> None:
    assert canonical_resource(resource) == expected
    assert canonical_resource(expected) == expected


AMBIGUOUS = [
    # (resource, problem)
    ("file:/../x", "climbs above its root"),
    ("file:/data/../../x", "climbs above its root"),
    ("db:customers/../../x", "climbs above its root"),
    ("https://h/../x", "climbs above its root"),
    ("../x", "starts with a '.' or '..' segment"),
    ("./x", "starts with a '.' or '..' segment"),
    ("..", "starts with a '.' or '..' segment"),
    ("file:..", "starts with a '.' or '..' segment"),
    ("file:./x", "starts with a '.' or '..' segment"),
    ("https://../x", "starts with a '.' or '..' segment"),
    ("file:.../x", "dots and spaces"),
    ("file:/data\\..\\secret", "backslash"),
    ("file:/data/public\\x", "backslash"),
    ("file:/data/%2e%2e/x", "percent-encoded '.', '/' or '\\'"),
    ("file:/data/%2E%2E/x", "percent-encoded '.', '/' or '\\'"),
    ("file:/data/.%2e/x", "percent-encoded '.', '/' or '\\'"),
    ("file:/data%2fsecret", "percent-encoded '.', '/' or '\\'"),
    ("file:/data%2Fsecret", "percent-encoded '.', '/' or '\\'"),
    ("file:/data%5csecret", "percent-encoded '.', '/' or '\\'"),
    ("file:/data/%00", "percent-encoded control character"),
    ("file:/data/%0a", "percent-encoded control character"),
    ("file:/data/%1f", "percent-encoded control character"),  # the last C0 control
    ("file:/data/%7f", "percent-encoded control character"),
    ("file:/data/%252e%252e/x", "more than once"),
    ("file:/data/%252E", "more than once"),
    ("file:/data/%25252e", "more than once"),
    ("file:/data/%%32e%%32e", "more than once"),
    ("file:/data/%2541", "more than once"),
    ("file:/data/%c0%ae%c0%ae/x", "not UTF-8"),
    ("file:/data/%c0%af", "not UTF-8"),
    ("file:/data/%ff", "not UTF-8"),
    ("file:/data/..;/secret", "dots and spaces"),
    ("file:/data/.;x", "dots and spaces"),
    ("file:/data/..?x", "dots and spaces"),
    ("file:/data/..#x", "dots and spaces"),
    ("file:/data/...", "dots and spaces"),
    ("file:/data/. ", "dots and spaces"),
    ("file:/data/.. ", "dots and spaces"),
    ("file:/data/ ", "dots and spaces"),
    ("https://h/a?x=/../admin", "after a '?' or '#'"),
    ("https://h/a#/./b", "after a '?' or '#'"),
    ("https://h?q/../x", "after a '?' or '#'"),
    ("https://h#f/../x", "after a '?' or '#'"),
    ("a#b/./c", "after a '?' or '#'"),
    ("file:/data/..%3B/x", "once percent-decoded"),
    ("file:/data/..%3f/x", "once percent-decoded"),
    ("h%74tps://x/y", "once percent-decoded"),
    ("file:/data/\uff0e\uff0e/secret", "compatibility form (such as fullwidth) of a '.'"),
    ("file:/data/\u2025/secret", "compatibility form (such as fullwidth) of a '.'"),
    ("file:/data/public\uff0f..\uff0fsecret", "compatibility form"),
    ("file:/data/\uff3c", "compatibility form"),
    ("file:/data/\uff05\uff12\uff45", "compatibility form"),
    ("file:/data/a\uff1fb", "compatibility form"),
    ("file:/data/a\u037eb", "compatibility form"),
    ("file:/data/c\u2105o", "compatibility form"),
    ("file:/data/%ef%bc%8f", "compatibility form"),
    ("file:/data/\x00", "control character"),
    ("file:/data/a\nb", "control character"),
    ("file:/data/a\x85b", "control character"),
    ("file:/data/\ud800", "lone surrogate"),
]


@pytest.mark.parametrize(("resource", "problem"), AMBIGUOUS)
def test_ambiguous_resources_are_an_evaluation_error(resource: str, problem: str) -> None:
    with pytest.raises(AmbiguousResource) as info:
        canonical_resource(resource)
    error = info.value
    assert isinstance(error, EvaluationError)
    assert isinstance(error, ValueError)
    assert problem in error.problem
    assert str(error) == f"the resource is ambiguous: it {error.problem}"
    assert "secret" not in str(error)
    assert "admin" not in str(error)


@pytest.mark.parametrize("resource", [5, b"file:/x", None, ["file:/x"]])
def test_a_resource_that_is_not_a_str_is_ambiguous(resource: object) -> None:
    with pytest.raises(AmbiguousResource, match="is not a string"):
        canonical_resource(resource)  # type: ignore[arg-type]


def test_a_str_subclass_is_refused() -> None:
    class Sly(str):
        pass

    with pytest.raises(AmbiguousResource, match="is not a string"):
        canonical_resource(Sly("file:/x"))


# --- properties ---------------------------------------------------------------------

PROBLEMS = {
    value for name, value in vars(_paths).items() if name.isupper() and isinstance(value, str)
}

_STARTS = st.sampled_from(
    ["file:/data/public/", "file:/data/", "file:/", "file:", "https://h/", "", "/data/public/"]
)


@given(_STARTS.flatmap(lambda start: path_texts(start=start)))
@example("file:/data/public/..%2f..%2fsecret")
def test_the_canonical_form_is_a_fixed_point_with_nothing_left_to_resolve(text: str) -> None:
    try:
        canonical = canonical_resource(text)
    except AmbiguousResource as exc:
        error = exc
    else:
        error = None
    if error is not None:
        # A fixed phrase, never the resource text.
        assert error.problem in PROBLEMS
        assert str(error) == f"the resource is ambiguous: it {error.problem}"
        return
    assert canonical_resource(canonical) == canonical
    _, _, path = canonical.partition("://") if "://" in canonical else ("", "", canonical)
    segments = path.split("/")[1:]
    assert "." not in segments
    assert ".." not in segments
    if len(segments) > 1:
        assert "" not in segments
    assert "\\" not in canonical


# Readers a tool might be: each takes the path after "file:" and resolves it its way.
Reader = Callable[[str], str]


def _posix(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _strip_params(path: str) -> str:
    return "/".join(segment.split(";")[0] for segment in path.split("/"))


def _windows(path: str) -> str:
    segments = path.replace("\\", "/").split("/")
    return "/".join(segment.rstrip(". ") or segment for segment in segments)


def _url(path: str) -> str:
    for mark in "?#":
        path = path.split(mark)[0]
    return path


READERS: dict[str, Reader] = {
    "posix": _posix,
    "decode once": lambda p: _posix(unquote(p)),
    "decode twice": lambda p: _posix(unquote(unquote(p))),
    "decode thrice": lambda p: _posix(unquote(unquote(unquote(p)))),
    "backslash": lambda p: _posix(p.replace("\\", "/")),
    "nfkc": lambda p: _posix(unicodedata.normalize("NFKC", p)),
    "nfkc then decode": lambda p: _posix(unquote(unicodedata.normalize("NFKC", p))),
    "decode then nfkc": lambda p: _posix(unicodedata.normalize("NFKC", unquote(p))),
    "url": lambda p: _posix(_url(p)),
    "path parameters": lambda p: _posix(_strip_params(p)),
    "decode, parameters": lambda p: _posix(_strip_params(unquote(p))),
    "windows": lambda p: _posix(_windows(p)),
    "windows decoded": lambda p: _posix(_windows(unquote(p))),
}

# Each glob with the literal directory every resource it admits must stay in.
GLOBS = [
    ("file:/data/public/**", "/data/public"),
    ("file:/data/public/*", "/data/public"),
    ("file:/data/public/*.txt", "/data/public"),
    ("file:/data/public/**/x.txt", "/data/public"),
    ("file:/data/pub*/**", "/data"),
    ("file:/data/*", "/data"),
    ("file:/data/public/?", "/data/public"),
]


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + "/")


@given(_STARTS.flatmap(lambda start: path_texts(start=start)))
@example("file:/data/public/../secret")
@example("file:/data/public//../secret")
@example("file:/data/public/%2e%2e/secret")
@example("file:/data/public/%252e%252e/secret")
@example("file:/data/public/..\\secret")
@example("file:/data/public/..;/secret")
@example("file:/data/public/\uff0e\uff0e/secret")
@example("file:/data/public/x?/../../secret")
def test_a_matching_canonical_form_never_admits_a_path_outside_the_globs_directory(
    text: str,
) -> None:
    try:
        canonical = canonical_resource(text)
    except AmbiguousResource:
        return
    for pattern, directory in GLOBS:
        for fast in (True, False):
            if not GlobSet([pattern], resources=True, field="resource", fast=fast).matches(
                canonical
            ):
                continue
            assert text.startswith("file:"), (pattern, text)
            path = text[len("file:") :]
            for name, read in READERS.items():
                assert _inside(read(path), directory), (pattern, name, text)


@given(path_texts(start="file:/data/public/"))
def test_the_literal_prefix_survives_canonicalisation_when_nothing_climbs(text: str) -> None:
    try:
        canonical = canonical_resource(text)
    except AmbiguousResource:
        return
    if ".." not in text and "%" not in text:
        assert canonical.startswith("file:/data/public")


def test_no_canonical_composition_starts_with_a_structural_character() -> None:
    # _paths counts '/', '\\', '%', '?', '#', ';' before and after NFKC to find
    # lookalikes. That is sound only if NFKC never consumes one of them, that is,
    # if no precomposed character decomposes to one of them plus a combining mark.
    starts = []
    for code in range(sys.maxunicode + 1):
        decomposition = unicodedata.decomposition(chr(code)).split()
        if len(decomposition) > 1 and not decomposition[0].startswith("<"):
            starts.append(chr(int(decomposition[0], 16)))
    assert starts  # the scan found compositions at all
    assert not set(starts) & set("/\\%?#;.")


# --- class 7: linear time ------------------------------------------------------------


def _canonical_or_none(text: str) -> str | None:
    try:
        return canonical_resource(text)
    except AmbiguousResource:
        return None


ADVERSARIAL: list[Callable[[int], str]] = [
    lambda n: "file:/" + "a/" * n,
    lambda n: "file:/" + "a/../" * n,
    lambda n: "file:/" + "a/" * n + "../" * n,
    lambda n: "file:/" + "/" * n,
    lambda n: "file:/" + "./" * n + "x",
    lambda n: "file:/" + "." * n,
    lambda n: "file:/" + " " * n + ".",
    lambda n: "file:/" + "%41" * n,
    lambda n: "file:/" + "%c3%a9" * n,
    lambda n: "file:/" + "%" * n,
    lambda n: "file:/" + "%25" * n + "2e",
    lambda n: "file:/" + "\u00e9" * n,
    lambda n: "file:/" + "\uff41/" * n,
    lambda n: "file:/" + "a?" * n + "/..",
    lambda n: "https://" + "h" * n + "/x",
    lambda n: "file:" + ":" * n + "..",
]


@pytest.mark.parametrize("make", ADVERSARIAL)
def test_canonicalisation_is_linear(make: Callable[[int], str]) -> None:
    assert_linear(_canonical_or_none, make, 5_000)


def test_a_path_problem_reads_as_its_phrase() -> None:
    problem = _paths.PathProblem(_paths.CLIMBS)

    assert (str(problem), problem.problem) == (_paths.CLIMBS, _paths.CLIMBS)
