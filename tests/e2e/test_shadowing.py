"""A foreign module named runtime or audit fails loudly, by name, before it runs (ADR 0029)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SRC = ROOT / "src"
# The fake package's code must never run: the check finds it without importing it.
FAKE_BODY = "raise SystemExit('the foreign module ran')\n"


def _run(args: list[str], fakes: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(fakes)}  # before site-packages, as a user's would be
    return subprocess.run(
        args, capture_output=True, text=True, timeout=60, cwd=cwd, env=env, check=False
    )


def _fake_package(where: Path, name: str) -> Path:
    package = where / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_BODY)
    return package


@pytest.mark.parametrize("importer", ["audit", "analysis"])
def test_a_foreign_runtime_package_is_named_when_audit_or_analysis_is_imported(
    tmp_path: Path, importer: str
) -> None:
    fake = _fake_package(tmp_path / "fakes", "runtime")
    result = _run([sys.executable, "-c", f"import {importer}"], tmp_path / "fakes", tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    # Each package raises it from its own copy of the check.
    assert last.startswith(f"{importer}._shadow.ShadowedPackageError: ")
    assert "ghost-sdk's package 'runtime' is shadowed" in last
    assert f"finds {fake}," in last
    assert f"not ghost-sdk's {SRC / 'runtime'}" in last
    assert "Rename or remove the other 'runtime' module" in last
    assert "sys.path" in last
    assert "the foreign module ran" not in result.stderr


def test_a_foreign_audit_module_is_named_when_analysis_is_imported(tmp_path: Path) -> None:
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    (fakes / "audit.py").write_text(FAKE_BODY)
    result = _run([sys.executable, "-c", "from analysis import verify_run"], fakes, tmp_path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("analysis._shadow.ShadowedPackageError: ")
    assert f"`import audit` finds {fakes / 'audit.py'}," in last
    assert "the foreign module ran" not in result.stderr


def test_the_error_is_an_import_error_with_its_fields(tmp_path: Path) -> None:
    fakes = tmp_path / "fakes"
    _fake_package(fakes, "runtime")
    script = (
        "try:\n"
        "    import audit\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc.package, exc.found, exc.expected, sep='|')\n"
    )
    result = _run([sys.executable, "-c", script], fakes, tmp_path)
    assert result.stdout.strip().split("|") == [
        "ShadowedPackageError",
        "runtime",
        "runtime",
        str(fakes / "runtime"),
        str(SRC / "runtime"),
    ]


def test_the_ghost_command_names_a_foreign_runtime(tmp_path: Path) -> None:
    ghost = shutil.which("ghost", path=str(Path(sys.executable).parent))
    assert ghost is not None
    fakes = tmp_path / "fakes"
    fake = _fake_package(fakes, "runtime")
    result = _run([ghost, "--help"], fakes, tmp_path)
    assert result.returncode == 1
    assert f"'runtime' is shadowed: `import runtime` finds {fake}" in result.stderr
    assert result.stdout == ""


def test_a_runtime_py_in_the_current_directory_is_named(tmp_path: Path) -> None:
    # The commonest clash: a script of the user's own, beside their program.
    (tmp_path / "runtime.py").write_text(FAKE_BODY)
    result = _run([sys.executable, "-c", "import audit"], tmp_path / "nothing", tmp_path)
    assert result.returncode == 1
    assert f"finds {tmp_path / 'runtime.py'}," in result.stderr
    assert "the foreign module ran" not in result.stderr


def test_without_a_clash_every_package_imports_and_the_command_runs(tmp_path: Path) -> None:
    result = _run(
        [sys.executable, "-c", "import analysis, audit, runtime; print(runtime.__version__)"],
        tmp_path / "nothing",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == runtime_version()


def runtime_version() -> str:
    from importlib.metadata import version

    return version("ghost-sdk")


def test_the_two_copies_of_the_check_are_one_text() -> None:
    # Each package raises the error when the other is the one shadowed (see the module).
    audit_copy = (SRC / "audit" / "_shadow.py").read_text()
    analysis_copy = (SRC / "analysis" / "_shadow.py").read_text()
    assert audit_copy == analysis_copy


def test_an_already_imported_ghost_package_passes_and_a_foreign_one_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import types

    from audit._shadow import ShadowedPackageError, require_ghost_package

    require_ghost_package("runtime")  # ghost's, in sys.modules already
    impostor = types.ModuleType("runtime")
    impostor.__file__ = str(tmp_path / "runtime.py")
    monkeypatch.setitem(sys.modules, "runtime", impostor)
    with pytest.raises(ShadowedPackageError) as caught:
        require_ghost_package("runtime")
    assert caught.value.found == str(tmp_path / "runtime.py")
    monkeypatch.delitem(sys.modules, "runtime")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    with pytest.raises(ShadowedPackageError) as missing:
        require_ghost_package("runtime")
    assert missing.value.found == "nothing"


def test_a_namespace_package_or_a_single_file_is_never_ghosts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from audit._shadow import ShadowedPackageError, require_ghost_package

    first, second = tmp_path / "a", tmp_path / "b"
    (first / "runtime").mkdir(parents=True)  # no __init__.py: namespace portions
    (second / "runtime").mkdir(parents=True)
    monkeypatch.delitem(sys.modules, "runtime")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    with pytest.raises(ShadowedPackageError) as spread:
        require_ghost_package("runtime")
    assert spread.value.found == f"{first / 'runtime'}, {second / 'runtime'}"
    single = tmp_path / "c"
    single.mkdir()
    (single / "runtime.py").write_text(FAKE_BODY)
    monkeypatch.setattr(sys, "path", [str(single)])
    with pytest.raises(ShadowedPackageError) as module:
        require_ghost_package("runtime")
    assert module.value.found == str(single / "runtime.py")
    assert "runtime" not in sys.modules  # found, never imported
