"""The project's modules import each other in one direction only: no cycle, and none of them
imports the command line but the command line itself."""

import ast
import os

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
