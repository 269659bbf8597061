"""`python server.py [flags]` from a checkout: `buildshelf serve [flags]`.

The routes live in buildshelf/server.py, the snapshot and the watcher in buildshelf/store.py.
"""

import sys

from buildshelf.server import main

if __name__ == "__main__":
    sys.exit(main())
