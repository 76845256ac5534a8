"""``python -m analysis``: the same command line as the ``ghost`` console script."""

from __future__ import annotations

from analysis._cli import main

raise SystemExit(main())
