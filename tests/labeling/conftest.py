"""Labeling fixtures: the first MATH-500 rows, and a headless Chromium.

Solutions with given step texts are ``tests.factories.solution_with_steps``; members are the ``member`` fixture
of tests/conftest.py.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def math500_rows(shared_data: Path) -> list[dict[str, Any]]:
    with (shared_data / "math" / "math500.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(20), handle, strict=False)]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}
