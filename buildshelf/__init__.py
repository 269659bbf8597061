"""Buildshelf: a self-hosted build-distribution API over hand-edited JSON files.

`buildshelf.server` has the routes (`make_app`), `buildshelf.store` the snapshot and the
watcher; docs/architecture.md maps the rest.
"""
