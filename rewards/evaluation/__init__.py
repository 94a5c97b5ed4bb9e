"""Steplab evaluation: best-of-N (the paper's protocol, vectorised, plus closed forms) and step metrics.

Pure Python + NumPy; importable without Django. Entry points:

* :func:`load_scored_samples` (``scored-test-samples.jsonl`` -> list of :class:`Pool`)
* :func:`best_of_n` (Monte-Carlo mean/std per method and N, plus exact values) and
  :func:`exact_best_of_n` (closed forms for pass, prm, orm)
* :mod:`rewards.evaluation.step_metrics` (step AUROC, ProcessBench F1, diagnostics)
* :mod:`rewards.evaluation.reference` (pure-Python trial loop and exhaustive enumeration)
* CLI: ``python -m rewards.evaluation best-of-n --samples FILE --out FILE.json``
"""
from .best_of_n import METHODS, PAPER_NS, best_of_n, default_ns, encode_pools, exact_best_of_n, simulate_trials
from .pools import Pool, ScoredSamplesError, load_scored_samples, pools_from_records
from .step_metrics import (
    correct_answer_wrong_step_rate,
    first_error_index,
    lowest_step_on_last_rate,
    processbench_metrics,
    step_auroc,
    step_labels_from_ratings,
)

__all__ = [
    "METHODS",
    "PAPER_NS",
    "Pool",
    "ScoredSamplesError",
    "best_of_n",
    "correct_answer_wrong_step_rate",
    "default_ns",
    "encode_pools",
    "exact_best_of_n",
    "first_error_index",
    "load_scored_samples",
    "lowest_step_on_last_rate",
    "pools_from_records",
    "processbench_metrics",
    "simulate_trials",
    "step_auroc",
    "step_labels_from_ratings",
]
