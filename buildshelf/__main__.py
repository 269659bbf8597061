"""`python -m buildshelf`: the `buildshelf` command."""

import sys

from buildshelf.cli import main

sys.exit(main())
