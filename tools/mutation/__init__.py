"""Mutation testing for ghost: AST mutants of the contract-critical modules (ADR 0014).

``python -m tools.mutation`` (``make mutation``) reads ``tools/mutation/modules.toml``
(module -> the tests that must kill its mutants), makes every mutant of each module
(`generate_mutants`), runs the module's tests against each one in a private copy of the
repository (`Workspace`), prints a score per module and keeps ``docs/mutation.md``
(`render_doc`): the surviving mutants, with the hand-kept reason each one survives.

Standard library only, so it runs wherever the tests run.
"""

from tools.mutation._cli import main
from tools.mutation._config import Config, ConfigError, Target, load_config
from tools.mutation._mutants import Generated, Mutant, generate_mutants
from tools.mutation._report import ModuleResult, parse_reasons, render_doc
from tools.mutation._runner import Baseline, Outcome, Status, Workspace, copy_tree

__all__ = [
    "Baseline",
    "Config",
    "ConfigError",
    "Generated",
    "ModuleResult",
    "Mutant",
    "Outcome",
    "Status",
    "Target",
    "Workspace",
    "copy_tree",
    "generate_mutants",
    "load_config",
    "main",
    "parse_reasons",
    "render_doc",
]
