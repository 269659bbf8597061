"""The project's modules import each other in one direction only: no cycle, and none of them
imports the command line but the command line itself."""

import ast
import configparser
import os
import sys

from helpers import ROOT

MODULES = {name[:-3] for name in os.listdir(ROOT) if name.endswith(".py")}


def imports(module):
    """The project modules `module` imports, anywhere in its file (a __main__ block too)."""
    with open(os.path.join(ROOT, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
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
    assert [module for module, imported in GRAPH.items() if "cli" in imported] == []


def test_the_graph_is_read():
    assert {"datafile", "model"} <= GRAPH["store"] and "server" in GRAPH["cli"]


# Top-level modules of well-known packages a box may have beside Buildshelf: installed at the
# top of site-packages, a module of ours by one of these names would hide theirs, or be hidden.
KNOWN_ELSEWHERE = {"jenkins", "mirror", "yaml", "requests", "six", "attr", "jwt", "git",
                   "docker", "boto3", "click", "flask", "jinja2", "markdown", "toml"}  # fmt: skip


def test_no_module_takes_a_name_the_standard_library_or_a_known_package_has():
    installed = configparser.ConfigParser()
    installed.read(os.path.join(ROOT, "setup.cfg"), encoding="utf-8")
    modules = set(installed.get("options", "py_modules").split())
    assert modules == MODULES  # every module is installed, and nothing else
    assert modules & (sys.stdlib_module_names | KNOWN_ELSEWHERE) == set()
