"""Candidate generation without Django: N PRM800K-format samples per problem from a local causal LM.

``python -m rewards.sampling sample --config job.json`` writes a JSONL for ``manage.py import_solutions``.
Importing this package loads neither torch nor transformers (the web side can validate job configs).
"""
from __future__ import annotations

from .config import SampleConfig, SamplingConfigError, load_config, parse_config

__all__ = ["SampleConfig", "SamplingConfigError", "load_config", "parse_config"]
