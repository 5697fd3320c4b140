"""``python -m perfkit``: the ``perfkit`` command, where its script is not on ``PATH``."""

import sys

from .cli.parser import main

sys.exit(main())
