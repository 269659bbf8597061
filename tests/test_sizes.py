"""The package stays readable: no module over 450 lines and no function over 100 (issue 34).
A module that grows past it is split along a seam, as docs/architecture.md says."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "buildshelf"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 100


def test_the_package_is_found():
    assert len(MODULES) > 40


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_450_lines(path):
    lines = path.read_text().count("\n")
    assert lines <= MAX_MODULE_LINES, f"{path.name}: {lines} lines"


def test_no_function_is_over_100_lines():
    long = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {length}")
    assert not long
