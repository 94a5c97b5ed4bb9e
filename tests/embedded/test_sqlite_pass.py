"""The suite runs on PostgreSQL; ``./run demo`` runs on SQLite. The tests marked ``both_databases`` run again here
in a pytest subprocess on a fresh SQLite database, without Redis (the filesystem broker), as the demo runs."""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "both_databases"
#: the SQLite pass must run at least this many tests: a pass that collects nothing proves nothing
MINIMUM = 10


def _marked_files() -> list[str]:
    """Every test file that names the marker (a cheap selection: collecting the whole suite costs ~40 s)."""
    here = Path(__file__).resolve()
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                  if path.resolve() != here and MARKER in path.read_text(encoding="utf-8"))


def test_the_tests_marked_for_both_databases_pass_on_sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items()
           if key not in ("REDIS_URL", "MEDIA_ROOT", "STATIC_ROOT", "STEPLAB_EXPORT_TMP_DIR", "STEPLAB_JOBS_ROOT",
                          "STEPLAB_MODELS_DIR", "STEPLAB_WEBHOOK_QUEUE")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'steplab.sqlite3'}", STEPLAB_VAR_DIR=str(tmp_path / "var"),
               DJANGO_ALLOW_ASYNC_UNSAFE="true", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    junit = tmp_path / "junit.xml"
    files = _marked_files()
    assert files, f"no test file under tests/ names the {MARKER} marker"
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", MARKER, "-p", "no:cacheprovider", "-q",
                          f"--junitxml={junit}", *files], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1800)
    output = f"{run.stdout}\n{run.stderr}"[-20_000:]
    assert run.returncode == 0, f"the SQLite pass failed (exit {run.returncode}):\n{output}"
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    skipped = [case.get("name") for case in cases if case.find("skipped") is not None]
    assert not skipped, f"skipped on SQLite: {skipped}\n{output}"
    assert len(cases) >= MINIMUM, f"only {len(cases)} tests ran on SQLite:\n{output}"
    ran = {case.get("name") for case in cases}
    marked_here = {item.name for item in request.session.items if item.get_closest_marker(MARKER)}
    assert marked_here <= ran, f"marked but not run on SQLite: {sorted(marked_here - ran)}\n{output}"
