"""`python -m buildshelf`: the `buildshelf` command."""

import sys

from buildshelf.cli import main

if __name__ == "__main__":
    sys.exit(main())
