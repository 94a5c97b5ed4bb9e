"""The house's size rules: no product module over 500 lines (a models package's files and migrations aside) and no
product function over 80 lines (``bench/`` and the tests aside)."""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("steplab", "stepcore", "annotate", "api", "rewards", "webhooks", "demo", "steplab_client", "endpoints")
MODULE_LINES = 500
FUNCTION_LINES = 80


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in relative:
                yield relative, path


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines from ``def`` to its last line) of every function, methods and nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from _functions(node, f"{name}.")
        else:
            yield from _functions(node, prefix)


def test_no_product_module_is_over_500_lines() -> None:
    long = {relative: len(path.read_text(encoding="utf-8").splitlines()) for relative, path in _modules()
            if "/models/" not in relative}
    assert {relative: lines for relative, lines in long.items() if lines > MODULE_LINES} == {}


def test_no_product_function_is_over_80_lines() -> None:
    lengths = {f"{relative}::{name}": lines for relative, path in _modules()
               for name, lines in _functions(ast.parse(path.read_text(encoding="utf-8")))}
    assert {name: lines for name, lines in lengths.items() if lines > FUNCTION_LINES} == {}


def test_the_walk_sees_methods_and_nested_functions() -> None:
    tree = ast.parse("class A:\n    def m(self):\n        def inner():\n            pass\n")
    assert dict(_functions(tree)) == {"A.m": 3, "A.m.inner": 2}
