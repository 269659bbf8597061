"""The one writer of data files: each change locked, checked and written whole."""
