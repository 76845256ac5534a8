"""The mutation targets: which modules are mutated, and which test files must kill them.

The configuration is one TOML file (``tools/mutation/modules.toml``)::

    src = "src"        # the import root; a module's dotted name is its path under it

    [modules]
    "src/runtime/_glob.py" = ["tests/runtime/test_glob.py", "tests/runtime/test_gate.py"]
    # a module whose log events are part of the contract opts back in to mutating them:
    "src/audit/_anchor.py" = { tests = ["tests/audit/test_anchor.py"], mutate_logging = true }

Paths are relative to the repository root. Test entries are whatever pytest accepts
as a path (a file or a directory), listed fastest and most focused first: each mutant
runs them with ``-x``, so the first failing test ends the run.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["Config", "ConfigError", "Target", "load_config"]


class ConfigError(ValueError):
    """The configuration is malformed or names a file that does not exist."""


@dataclass(frozen=True, slots=True)
class Target:
    """One module to mutate.

    Attributes:
        path: the module's path from the repository root (``src/runtime/_glob.py``).
        module: its dotted name (``runtime._glob``).
        tests: the pytest paths that must kill its mutants, in order.
        mutate_logging: whether logging calls are mutated too.
    """

    path: str
    module: str
    tests: tuple[str, ...]
    mutate_logging: bool = False


@dataclass(frozen=True, slots=True)
class Config:
    """The whole configuration.

    Attributes:
        src: the import root (``src``), put first on ``PYTHONPATH`` of every run.
        targets: the modules, in the file's order.
    """

    src: str
    targets: tuple[Target, ...]


def _module_name(path: str, src: str) -> str:
    pure = PurePosixPath(path)
    try:
        relative = pure.relative_to(src)
    except ValueError:
        raise ConfigError(f"module {path!r} is not under the import root {src!r}") from None
    if pure.suffix != ".py":
        raise ConfigError(f"module {path!r} is not a .py file")
    parts = list(relative.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: tests must be a non-empty list of paths")
    return tuple(value)


def load_config(config: Path, root: Path) -> Config:
    """Read the configuration and check that every module and test path exists.

    Args:
        config: the TOML file.
        root: the repository root the paths are relative to.

    Returns:
        The import root and the targets, in the file's order.

    Raises:
        ConfigError: the file is not valid TOML, has the wrong shape, or names a
            module or test path that does not exist under ``root``.
    """
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {config}: {exc}") from None
    src = data.get("src", "src")
    modules = data.get("modules")
    if not isinstance(src, str) or not isinstance(modules, dict) or not modules:
        raise ConfigError(f"{config}: needs a [modules] table (and `src` must be a string)")
    unknown = set(data) - {"src", "modules"}
    if unknown:
        raise ConfigError(f"{config}: unknown keys {sorted(unknown)}")
    targets: list[Target] = []
    for path, entry in modules.items():
        where = f"{config}: {path!r}"
        mutate_logging = False
        if isinstance(entry, dict):
            extra = set(entry) - {"tests", "mutate_logging"}
            if extra:
                raise ConfigError(f"{where}: unknown keys {sorted(extra)}")
            tests = _strings(entry.get("tests"), where)
            flag = entry.get("mutate_logging", False)
            if not isinstance(flag, bool):
                raise ConfigError(f"{where}: mutate_logging must be true or false")
            mutate_logging = flag
        else:
            tests = _strings(entry, where)
        missing = [p for p in (path, *tests) if not (root / p).exists()]
        if missing:
            raise ConfigError(f"{where}: no such file or directory: {', '.join(missing)}")
        targets.append(Target(path, _module_name(path, src), tests, mutate_logging))
    return Config(src, tuple(targets))
