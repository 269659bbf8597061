"""The private parts of waitress and bottle that the code relies on are all there."""

from buildshelf.serving import private_names


def test_every_private_name_relied_on_is_in_the_installed_versions():
    absent = private_names.missing()
    assert absent == [], (
        "the installed waitress or bottle lacks what private_names.py lists: "
        + ", ".join(absent)
        + " (a release renamed it: see private_names.py for what relies on it)"
    )


def test_a_name_that_is_not_there_is_named():
    names = private_names.PRIVATE_NAMES
    try:
        private_names.PRIVATE_NAMES = names + (
            ("waitress.channel", "HTTPChannel", ("_no_such_method",), "a test"),
            ("waitress", "no_such_function", (), "a test"),
        )
        assert private_names.missing() == [
            "waitress.channel.HTTPChannel._no_such_method",
            "waitress.no_such_function",
        ]
    finally:
        private_names.PRIVATE_NAMES = names
