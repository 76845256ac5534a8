"""The distribution a user installs: built, installed into a fresh venv, run (issue 13).

One module-scoped build (``python -m build``: the sdist, then the wheel from the
sdist, so a file the sdist forgets fails here) and one fresh virtual
environment that installs the wheel *with* its dependencies from the package
index, as ``pip install ghost-sdk`` would. Marked ``packaging`` so it can be
deselected (``-m 'not packaging'``); ``make test`` runs it.
"""

from __future__ import annotations

import email
import re
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from email.message import Message
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).parents[2]
PACKAGES = ("runtime", "audit", "analysis")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _run(args: list[str | Path], cwd: Path, timeout: int = 300) -> str:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )
    assert result.returncode == 0, f"{args}: {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out)
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (path,) = dist.glob("ghost_sdk-*.whl")
    return path


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    home = tmp_path_factory.mktemp("venv")
    venv.create(home / "env", with_pip=True, clear=True)
    python = home / "env" / "bin" / "python"
    # The venv module's bundled pip may predate PEP 639 (pip < 25.1 leaves `pip show`'s
    # License blank for a License-Expression); a user's `pip install -U pip` is the same step.
    _run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], cwd=home, timeout=600)
    _run([python, "-m", "pip", "install", "--quiet", wheel], cwd=home, timeout=600)
    return home / "env"


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def test_the_wheel_ships_py_typed_the_license_and_the_package_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for package in PACKAGES:
        assert f"{package}/py.typed" in names, package
    assert "runtime/integrations/__init__.py" in names
    assert {"analysis/demo_policy.toml", "analysis/report.js", "analysis/report.css"} <= names
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(license_file).decode()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    # Nothing but ghost's three packages at the top level: no tests, tools or bench.
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == set(PACKAGES)


def test_the_sdist_holds_the_license_and_the_sources(dist: Path) -> None:
    (sdist,) = dist.glob("ghost_sdk-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "src/runtime/py.typed"} <= names


def test_the_metadata_declares_license_urls_classifiers_and_extras(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert set(urls) == set(PROJECT["urls"])
    assert all(u.startswith("https://") for u in urls.values())
    assert meta.get_all("Classifier") == PROJECT["classifiers"]
    assert "Typing :: Typed" in PROJECT["classifiers"]
    extras = set(meta.get_all("Provides-Extra") or [])
    assert {"test", "dev", "docs", "report", "mcp", "openai-agents", "langchain"} <= extras
    # The developer's tools are not what a test run, or a user, installs.
    for extra in ("test", "docs", "report"):
        tools = [
            r for r in PROJECT["optional-dependencies"][extra] if r.startswith(("mypy", "ruff"))
        ]
        assert tools == [], extra


def test_a_fresh_venv_runs_ghost_demo_from_the_wheel(fresh_env: Path, tmp_path: Path) -> None:
    bin_dir = fresh_env / "bin"
    out = _run([bin_dir / "ghost", "demo", "--out", tmp_path / "demo.mcap"], cwd=tmp_path)
    assert "verdict" in out.lower()
    # ... and the run it wrote verifies there: intact and sealed.
    _run([bin_dir / "ghost", "verify", "--mcap", tmp_path / "demo.mcap"], cwd=tmp_path)
    # The code that ran is the wheel's, not this source tree's.
    where = _run(
        [bin_dir / "python", "-c", "import runtime, audit, analysis; print(runtime.__file__)"],
        cwd=tmp_path,
    )
    assert str(fresh_env) in where
    assert str(ROOT / "src") not in where


def test_every_package_has_the_distribution_version(fresh_env: Path, tmp_path: Path) -> None:
    script = (
        "import runtime, audit, analysis\n"
        "print(runtime.__version__, audit.__version__, analysis.__version__)"
    )
    versions = _run([fresh_env / "bin" / "python", "-c", script], cwd=tmp_path).split()
    assert versions == [PROJECT["version"]] * 3
    ghost = _run([fresh_env / "bin" / "ghost", "--version"], cwd=tmp_path)
    assert ghost.strip() == f"ghost {PROJECT['version']}"


def test_pip_show_lists_the_license_urls_and_classifiers(fresh_env: Path, tmp_path: Path) -> None:
    shown = _run(
        [fresh_env / "bin" / "python", "-m", "pip", "show", "--verbose", "ghost-sdk"], cwd=tmp_path
    )
    assert re.search(r"^License-Expression: Apache-2\.0$", shown, re.MULTILINE), shown
    assert "Project-URLs:" in shown
    for label, url in PROJECT["urls"].items():
        assert f"{label}, {url}" in shown
    assert "Classifiers:" in shown
    for classifier in PROJECT["classifiers"]:
        assert classifier in shown
