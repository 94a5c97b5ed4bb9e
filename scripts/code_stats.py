"""Size and lint figures of the product code, for before/after comparisons of a clean-up.

Prints the files over 400 lines, the functions over 60 lines (measured with ast, decorators excluded) and the
number of ruff and mypy findings (ruff over the whole repository, mypy over the packages configured in
pyproject.toml, exactly as tests/test_quality_gate.py runs them).

    python scripts/code_stats.py                  # steplab/ annotate/ rewards/, with ruff and mypy
    python scripts/code_stats.py tests --no-checkers
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT_PACKAGES = ("steplab", "annotate", "rewards")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def python_files(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        candidates = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for candidate in candidates:
            # Generated code is not written by hand; its size says nothing about the design.
            if "migrations" not in candidate.parts:
                yield candidate


def long_functions(path: Path, source: str) -> Iterator[tuple[str, int, int]]:
    """(qualified name, first line, length) of every function or method longer than MAX_FUNCTION_LINES."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    yield name, child.lineno, length
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(source, filename=str(path)), "")


def ruff_findings() -> int:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "json", "--exit-zero", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return len(json.loads(result.stdout))


def mypy_findings() -> int:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):  # 2 means mypy itself failed (bad config, crash), not a finding
        raise SystemExit(f"mypy failed:\n{result.stdout}{result.stderr}")
    return len(re.findall(r"^\S+:\d+: error:", result.stdout, flags=re.MULTILINE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the product packages)")
    parser.add_argument("--no-checkers", action="store_true", help="skip the ruff and mypy counts (mypy is slow)")
    args = parser.parse_args()
    paths = args.paths or [ROOT / package for package in PRODUCT_PACKAGES]

    big_files: list[tuple[Path, int]] = []
    big_functions: list[tuple[Path, str, int, int]] = []
    for path in python_files(paths):
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n") + (0 if source.endswith("\n") or not source else 1)
        if lines > MAX_FILE_LINES:
            big_files.append((path, lines))
        big_functions.extend((path, name, line, length) for name, line, length in long_functions(path, source))

    def shown(path: Path) -> str:
        resolved = path.resolve()
        return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)

    print(f"files over {MAX_FILE_LINES} lines: {len(big_files)}")
    for path, lines in sorted(big_files, key=lambda item: -item[1]):
        print(f"  {lines:5d}  {shown(path)}")
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(big_functions)}")
    for path, name, line, length in sorted(big_functions, key=lambda item: -item[3]):
        print(f"  {length:5d}  {shown(path)}:{line} {name}")
    if not args.no_checkers:
        print(f"ruff findings: {ruff_findings()}")
        print(f"mypy findings: {mypy_findings()}")


if __name__ == "__main__":
    main()
