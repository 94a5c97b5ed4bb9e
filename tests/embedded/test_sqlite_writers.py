"""On the embedded default several requests and workers write at once. A transaction that read first and then
writes cannot take SQLite's write lock once another connection committed in between: it failed at once with
"database is locked" (a 500) instead of waiting its turn, until transactions took the lock when they begin."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_labelers_writing_at_once_on_a_sqlite_file_all_get_through(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'steplab.sqlite3'}", STEPLAB_VAR_DIR=str(tmp_path / "var"),
               DJANGO_SETTINGS_MODULE="steplab.settings", PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("sqlite_writers.py"))], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result == {"errors": [], "labeled": 40, "distinct": 40}, run.stderr[-5000:]
