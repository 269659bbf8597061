"""The package's modules import each other as docs/architecture.md says: down its table of
layers, never in a cycle, and waitress only where it lists. Only the serving side loads
waitress."""

import ast
import json
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

PACKAGE = os.path.join(ROOT, "buildshelf")
FILES = {
    os.path.relpath(os.path.join(folder, name), ROOT)[:-3].replace(os.sep, "."): os.path.join(
        folder, name
    )
    for folder, _, names in os.walk(PACKAGE)
    for name in names
    if name.endswith(".py")
}
PACKAGES = {name.removesuffix(".__init__") for name in FILES if name.endswith(".__init__")}
MODULES = {name for name in FILES if not name.endswith(".__init__")}


def syntax_tree(module):
    with open(FILES[module], encoding="utf-8") as f:
        return ast.parse(f.read())


def imported_names(module, tree=None):
    """Every dotted name `module` (or `tree`, as if it were that module) imports, anywhere
    (in a function too), relative imports made absolute; `from a import b` gives a and a.b."""
    is_package = module.endswith(".__init__")
    package = module.removesuffix(".__init__") if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree or syntax_tree(module)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}".rstrip(".")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def imports(module, tree=None):
    """The package's modules that `module` imports."""
    return imported_names(module, tree) & MODULES


GRAPH = {module: imports(module) for module in MODULES}


def architecture():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        return f.read()


def documented_layers(text):
    """{module: layer} from the table of layers in docs/architecture.md: the fenced block
    after '<!-- layers -->', a line per layer ('N  module module...', an indented line going
    on with the one before), module names under buildshelf."""
    block = re.search(r"<!-- layers -->\n```text\n(.*?)```", text, re.S).group(1)
    layers, number = {}, None
    for line in block.splitlines():
        if match := re.match(r"(\d+)\s+(.*)", line):
            number, names = int(match[1]), match[2]
        elif line.startswith(" ") and number is not None:
            names = line
        else:
            continue  # the heading
        for name in names.split():
            assert f"buildshelf.{name}" not in layers, f"{name} is in two layers"
            layers[f"buildshelf.{name}"] = number
    return layers


def documented_waitress_importers(text):
    """The modules docs/architecture.md says import waitress, from the sentence that lists
    them (paths in backquotes)."""
    sentence = re.search(r"The modules that import waitress[^:]*:(.*?)\.\n", text, re.S)
    paths = re.findall(r"`(buildshelf/[\w/]+)\.py`", sentence.group(1))
    return {path.replace("/", ".") for path in paths}


LAYERS = documented_layers(architecture())
# The modules that start the server: they may load waitress, through buildshelf.serving.
STARTS_THE_SERVER = {"buildshelf.server", "buildshelf.cli", "buildshelf.__main__"}


def test_every_module_has_one_layer():
    assert sorted(LAYERS) == sorted(MODULES)


def against_the_layers(graph, layers=LAYERS):
    return sorted(
        f"{module} (layer {layers[module]}) imports {imported} (layer {layers[imported]})"
        for module, imported_modules in graph.items()
        for imported in imported_modules
        if layers[imported] >= layers[module]
    )


def test_imports_go_down_the_layers():
    """A module imports only modules of lower layers: none of its own layer, none above."""
    assert against_the_layers(GRAPH) == []


def test_an_import_against_the_layers_is_found():
    """Made inside a function, or relative, or of a module of the same layer."""
    source = (
        "from buildshelf.web.downloads import answer\n"
        "def late():\n"
        "    from . import answers\n"
        "    from ..serving import server\n"
    )
    graph = {"buildshelf.web.query": imports("buildshelf.web.query", ast.parse(source))}
    # Layers of its own, so that the test holds whatever the table says of these modules.
    layers = {
        "buildshelf.web.query": 1,
        "buildshelf.web.downloads": 1,
        "buildshelf.web.answers": 2,
        "buildshelf.serving.server": 5,
    }
    assert against_the_layers(graph, layers) == [
        "buildshelf.web.query (layer 1) imports buildshelf.serving.server (layer 5)",
        "buildshelf.web.query (layer 1) imports buildshelf.web.answers (layer 2)",
        "buildshelf.web.query (layer 1) imports buildshelf.web.downloads (layer 1)",
    ]


def test_the_packages_import_nothing_of_ours():
    """A package's __init__ runs before any of its modules: it would sit below them all."""
    assert {package: imported_names(f"{package}.__init__") & MODULES for package in PACKAGES} == {
        package: set() for package in PACKAGES
    }


def test_the_modules_that_import_waitress_are_those_listed():
    importers = {
        module
        for module in MODULES
        if any(name.partition(".")[0] == "waitress" for name in imported_names(module))
    }
    assert importers == documented_waitress_importers(architecture())


def test_only_the_modules_that_start_the_server_import_the_serving_side():
    importers = {
        module
        for module, imported in GRAPH.items()
        if not module.startswith("buildshelf.serving.")
        and any(name.startswith("buildshelf.serving.") for name in imported)
    }
    assert importers <= STARTS_THE_SERVER


def test_no_module_imports_another_that_imports_it_back():
    cycles = []

    def visit(module, path):
        for imported in sorted(GRAPH[module]):
            if imported in path:
                cycles.append(path[path.index(imported) :] + [imported])
            elif imported not in done:
                visit(imported, path + [imported])
        done.add(module)

    done = set()
    for module in sorted(MODULES):
        if module not in done:
            visit(module, [module])
    assert cycles == []


def test_the_graph_is_read():
    assert {"buildshelf.datafiles.datafile", "buildshelf.model"} <= GRAPH["buildshelf.store"]
    assert "buildshelf.server" in GRAPH["buildshelf.cli"]


# Run in a fresh interpreter in which importing waitress fails: prints each module named in
# argv that could not be imported without it, with why.
WITHOUT_WAITRESS = """
import importlib, json, sys

class NoWaitress:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "waitress":
            raise ImportError(f"imports {name}")

sys.meta_path.insert(0, NoWaitress())
failed = {}
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
    except ImportError as error:
        failed[module] = str(error)
print(json.dumps(failed))
"""


@pytest.mark.system
def test_only_the_serving_side_loads_waitress():
    """The HTTP side (buildshelf.web) and the data side import no waitress, directly or
    through another module of ours: a contract they share with the server, such as an
    environ key, is declared on their side."""
    outside = sorted(
        module
        for module in MODULES
        if not module.startswith("buildshelf.serving.") and module not in STARTS_THE_SERVER
    )
    assert {"buildshelf.web.shapes", "buildshelf.store"} <= set(outside)
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_WAITRESS, *outside],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(run.stdout) == {}


# Loaded by a server only when a request needs them: PyJWT and the cryptography under it (20 MB
# of every server's memory) at the first GitHub OIDC token (issue 34).
LOADED_WHEN_NEEDED = ("jwt", "cryptography")


@pytest.mark.system
def test_a_server_loads_no_module_it_needs_only_for_a_token():
    run = subprocess.run(
        [sys.executable, "-c", "import sys, buildshelf.server; print(*sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    loaded = {name.partition(".")[0] for name in run.stdout.split()}
    assert "buildshelf" in loaded
    assert loaded.isdisjoint(LOADED_WHEN_NEEDED)
