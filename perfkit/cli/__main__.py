"""``python -m perfkit.cli``: the ``perfkit`` command."""

import sys

from .parser import main

sys.exit(main())
