"""Developer tools for the ghost repository (not shipped in the ``ghost-sdk`` wheel)."""
