"""private_names.py is complete and true: every name of waitress and bottle that the code
uses is listed there, as documented or as private, and the installed versions have them all."""

import ast
import importlib
import inspect
import os

import pytest

from buildshelf.serving import private_names
from helpers import ROOT

LIBRARIES = ("waitress", "bottle")
# Names the code uses on objects of its own that some class of waitress or bottle also has.
COINCIDENCES = {
    "waitress": {
        "append": "list.append (waitress's file wrapper has append)",
        "file": "bodies.BodyBuffer.file, ours (waitress's buffers have a file)",
        "seek": "seeking a file (waitress's file wrapper has seek)",
        "write": "writing a file (waitress's tasks have write)",
        "start": "threading.Thread.start (accesslog.LineWriter)",
    },
    "bottle": {
        "cache": "Service.cache, ours (SimpleTemplate has a cache)",
        "code": "ApiError.code, ours (SimpleTemplate keeps its compiled code as code)",
        "expires": "Token.expires, ours: when a token expires (bottle's responses have expires)",
        "filename": "a multipart part's, upload.py's parser's (bottle's FileUpload has one)",
        "files": "Build.files, ours: a build's files by key (the request has files)",
        "match": "a regular expression's (bottle's Router has match)",
        "name": "the name of a view or a file (templates have a name)",
        "read": "reading a static file (WSGIFileWrapper has read)",
        "url": "Build.url (the request has url)",
    },
}


def _modules():
    """(dotted name, syntax tree) of every module of the package."""
    package = os.path.join(ROOT, "buildshelf")
    for folder, _, names in os.walk(package):
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                yield os.path.relpath(path, ROOT)[:-3].replace(os.sep, "."), tree


MODULES = dict(_modules())


def _aliases(tree):
    """{local name: what it is bound to, dotted} for every import in `tree`."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.partition(".")[0]] = (
                    alias.name if alias.asname else alias.name.partition(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _resolve(dotted):
    """The object `dotted` names (a library's module, class, function or instance)."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            value = getattr(value, part)
        return value
    raise ImportError(dotted)


def _qualified_uses(tree):
    """(module, object, name) of each library object `tree` names through an import or an
    attribute of one: `from waitress.task import ErrorTask` is ('waitress.task', '',
    'ErrorTask'), `wasyncore.poll` ('waitress.wasyncore', '', 'poll'),
    `wasyncore.dispatcher.close` ('waitress.wasyncore', 'dispatcher', 'close'). Attributes of
    an instance (`bottle.request.path`) are left to _instance_names."""
    bound = {k: v for k, v in _aliases(tree).items() if v.partition(".")[0] in LIBRARIES}
    uses = {(*dotted.rpartition(".")[::2],) for dotted in bound.values() if "." in dotted}
    uses = {(module, "", name) for module, name in uses}
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if not (chain and isinstance(node, ast.Name) and node.id in bound):
            continue
        module = bound[node.id]
        if not inspect.ismodule(_resolve(module)):  # a class imported from its module
            module, _, first = module.rpartition(".")
            chain.insert(0, first)
        if len(chain) > 1 and inspect.isclass(_resolve(f"{module}.{chain[0]}")):
            uses.add((module, chain[0], chain[1]))
        else:
            uses.add((module, "", chain[0]))
    return uses


def _listed(module, obj, name, entries):
    if obj:
        return any((m, o) == (module, obj) and name in names for m, o, names, _ in entries)
    # An attribute of a module: listed itself, or a class or module with entries of its own.
    return any(
        (m, o) == (module, "")
        and name in names
        or (m, o) == (module, name)
        or m == f"{module}.{name}"
        for m, o, names, _ in entries
    )


def test_every_waitress_and_bottle_object_named_is_listed():
    entries = private_names.DOCUMENTED + private_names.PRIVATE_NAMES
    unlisted = sorted(
        ".".join(filter(None, use))
        for tree in MODULES.values()
        for use in _qualified_uses(tree)
        if not _listed(*use, entries)
    )
    assert unlisted == []


def _library_classes(library):
    """The classes of `library` that the code names or private_names.py lists, with their
    bases in the library."""
    named = {
        _resolve(".".join(filter(None, use)))
        for tree in MODULES.values()
        for use in _qualified_uses(tree)
        if use[0].partition(".")[0] == library
    }
    named |= {
        _resolve(".".join(filter(None, entry[:2])))
        for entry in private_names.DOCUMENTED + private_names.PRIVATE_NAMES
        if entry[0].partition(".")[0] == library
    }
    return {
        base
        for cls in named
        if inspect.isclass(cls)
        for base in inspect.getmro(cls)
        if base.__module__.partition(".")[0] == library
    }


def _instance_names(trees):
    """Attribute names used in `trees` other than on a module, and the names of methods
    defined in classes (an override relies on the base calling it); no dunders."""
    found = set()
    for tree in trees:
        bound = _aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and not _is_module(node.value, bound):
                found.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                found.update(n.name for n in node.body if isinstance(n, ast.FunctionDef))
    return {name for name in found if not name.startswith("__")}


def _is_module(node, bound):
    """Whether `node` is a module imported, or a submodule of one (`importlib.metadata`)."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.insert(0, node.attr)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id in bound):
        return False
    try:
        return inspect.ismodule(_resolve(".".join([bound[node.id], *chain])))
    except (ImportError, AttributeError):
        return False


def _users(library):
    """The modules that handle `library`'s objects: waitress's are handled on the serving
    side only; bottle's wherever bottle is imported."""
    if library == "waitress":
        return [tree for name, tree in MODULES.items() if name.startswith("buildshelf.serving.")]
    return [t for t in MODULES.values() if "bottle" in _aliases(t).values()]


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_name_used_on_waitress_and_bottle_objects_is_listed(library):
    classes = _library_classes(library)
    entries = [
        (_resolve(".".join(filter(None, entry[:2]))), entry[2])
        for entry in private_names.DOCUMENTED + private_names.PRIVATE_NAMES
        if entry[0].partition(".")[0] == library
    ]
    theirs = {
        name
        for name in _instance_names(_users(library))
        if any(private_names.has(cls, name) for cls in classes)
    }
    unlisted = sorted(
        name
        for name in theirs - COINCIDENCES[library].keys()
        if not any(name in names and private_names.has(owner, name) for owner, names in entries)
    )
    assert unlisted == []
    assert len(theirs) > 20  # the code was read


def test_the_arguments_given_to_create_server_are_listed():
    tree = MODULES["buildshelf.serving.server"]
    dicts = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
    }
    given = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "waitress.create_server":
            for keyword in node.keywords:
                if keyword.arg:
                    given.add(keyword.arg)
                else:  # **LIMITS
                    given.update(key.value for key in dicts[keyword.value.id].keys)
    listed = {
        name
        for module, obj, names, _ in private_names.DOCUMENTED + private_names.PRIVATE_NAMES
        if (module, obj) in (("waitress", "create_server"), ("waitress.adjustments", "Adjustments"))
        for name in names
    }
    assert "max_request_body_size" in given
    assert given - listed == set()


def test_nothing_is_both_documented_and_private():
    def qualified(entries):
        return {(m, o, name) for m, o, names, _ in entries for name in names}

    assert qualified(private_names.DOCUMENTED) & qualified(private_names.PRIVATE_NAMES) == set()


def test_every_name_relied_on_is_in_the_installed_versions():
    absent = private_names.missing()
    assert absent == [], (
        "the installed waitress or bottle lacks what private_names.py lists: "
        + ", ".join(absent)
        + " (a release renamed it: see private_names.py for what relies on it)"
    )


def test_a_name_that_is_not_there_is_named(monkeypatch):
    monkeypatch.setattr(
        private_names,
        "PRIVATE_NAMES",
        private_names.PRIVATE_NAMES
        + (
            ("waitress.channel", "HTTPChannel", ("_no_such_method",), "a test"),
            ("waitress", "no_such_function", (), "a test"),
            ("waitress.wasyncore", "", ("no_such_function",), "a test"),
        ),
    )
    assert private_names.missing() == [
        "waitress.channel.HTTPChannel._no_such_method",
        "waitress.no_such_function",
        "waitress.wasyncore.no_such_function",
    ]
