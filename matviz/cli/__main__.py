"""``python -m matviz.cli``: the same as the ``matviz`` command."""

import sys

from matviz.cli import main

sys.exit(main())
