"""``python -m koordsched``: the same as the ``koordsched`` command."""

import sys

from koordsched.cli import main

if __name__ == "__main__":
    sys.exit(main())
