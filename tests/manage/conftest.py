"""Campaign-admin fixtures: a week-old timestamp, and a headless Chromium.

Solutions and finished labelings built row by row are ``tests.factories.numbered_solution`` and
``tests.factories.finished_labeling``; members are the ``member`` fixture of tests/conftest.py.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone


@pytest.fixture
def last_week() -> datetime:
    return timezone.now() - timedelta(days=7)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]}
