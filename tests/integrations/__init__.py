"""Tests of runtime.integrations: each adapter against its real framework, offline."""
