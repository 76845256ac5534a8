"""Tests of the repository tools (tools/)."""
