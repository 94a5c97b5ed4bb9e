"""Candidate generation without Django: N PRM800K-format samples per problem from a local causal LM.

``python -m rewards.sampling sample --config job.json`` writes a JSONL for ``manage.py import_solutions``;
``python -m rewards.sampling rollouts --config job.json`` writes Monte-Carlo step estimates of given solutions.
Importing this package loads neither torch nor transformers (the web side can validate job configs).
"""
from __future__ import annotations

from .config import (
    RolloutConfig,
    SampleConfig,
    SamplingConfigError,
    load_config,
    load_rollout_config,
    parse_config,
    parse_rollout_config,
)

__all__ = ["RolloutConfig", "SampleConfig", "SamplingConfigError", "load_config", "load_rollout_config",
           "parse_config", "parse_rollout_config"]
