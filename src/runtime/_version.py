"""The installed ghost-sdk version, recorded in every run."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["SDK_VERSION"]

try:
    SDK_VERSION: str = version("ghost-sdk")
except PackageNotFoundError:  # running from a source tree that was never installed
    SDK_VERSION = "0+unknown"
