"""``python -m viboost``: the ``viboost`` command line (see :mod:`viboost.cli`)."""

import sys

from viboost.cli import main

if __name__ == "__main__":
    sys.exit(main())
