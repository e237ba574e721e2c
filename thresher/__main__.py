"""``python -m thresher`` runs the ``thresher`` command line (see :mod:`thresher.cli`)."""

import sys

from thresher.cli import main

if __name__ == "__main__":
    sys.exit(main())
