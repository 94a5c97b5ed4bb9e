"""Fixtures for rewards.training; the PRM800K-derived data and the shared trained PRM are in
tests/trained_models.py."""
from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def minilm_tokenizer() -> Any:
    from rewards.training.config import default_model_path
    from rewards.training.modeling import load_tokenizer

    return load_tokenizer(default_model_path())
