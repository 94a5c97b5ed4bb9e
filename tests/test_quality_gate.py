"""The quality gate: ruff and mypy, configured in pyproject.toml, run as CI runs the suite.

Any finding fails the suite (and so `.ci/run`), with the checker's own report as the failure message. A per-line
`# noqa: CODE` / `# type: ignore[code]` is the only way past a finding, and it carries a comment saying why.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# mypy's incremental cache outside the checkout, so that a fresh clone (CI) on this machine re-checks only the
# modules whose content changed (about 2 s instead of 60–150 s); mypy compares each file's hash, so a stale entry
# is never trusted.
MYPY_CACHE = Path(os.environ.get("STEPLAB_MYPY_CACHE", Path.home() / ".cache" / "steplab" / "mypy"))

pytestmark = pytest.mark.quality_gate


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, f"ruff check . failed:\n{result.stdout}{result.stderr}"


def test_mypy_finds_nothing() -> None:
    result = _run("mypy", "--cache-dir", str(MYPY_CACHE))
    assert result.returncode == 0, f"mypy failed:\n{result.stdout}{result.stderr}"
