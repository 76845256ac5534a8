"""``python -m tools.mutation``: see `tools.mutation._cli`."""

import sys

from tools.mutation._cli import main

sys.exit(main())
