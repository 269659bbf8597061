"""The data files: their format and rules, read strictly, and checked for `check`."""
