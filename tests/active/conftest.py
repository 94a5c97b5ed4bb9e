"""Fixtures for the active-learning core: a few MATH-500 problems and a sampling job file."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def math_problems(shared_data: Path, tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The first three MATH-500 problems as a problems file (with ``unique_id`` and ``answer``)."""
    rows = []
    with (shared_data / "math" / "math500.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) == 3:
                break
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, rows
