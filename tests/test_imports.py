"""The project's modules import each other in one direction only: no cycle, and none of them
imports the command line but the command line itself. Only the serving side loads waitress."""

import ast
import json
import os
import subprocess
import sys

from helpers import ROOT

PACKAGE = os.path.join(ROOT, "buildshelf")
MODULES = {
    os.path.relpath(os.path.join(folder, name), ROOT)[:-3].replace(os.sep, ".")
    for folder, _, names in os.walk(PACKAGE)
    for name in names
    if name.endswith(".py") and name not in ("__init__.py", "__main__.py")
}


def imports(module):
    """The project modules `module` imports, anywhere in its file."""
    with open(os.path.join(ROOT, module.replace(".", os.sep) + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & MODULES


GRAPH = {module: imports(module) for module in MODULES}


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


def test_only_the_command_line_imports_the_command_line():
    assert [module for module, imported in GRAPH.items() if "buildshelf.cli" in imported] == []


def test_the_graph_is_read():
    assert {"buildshelf.datafile", "buildshelf.model"} <= GRAPH["buildshelf.store"]
    assert "buildshelf.server" in GRAPH["buildshelf.cli"]


# The modules that start the server: they may load waitress, through buildshelf.serving.
STARTS_THE_SERVER = {"buildshelf.server", "buildshelf.cli", "buildshelf.__main__"}
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
