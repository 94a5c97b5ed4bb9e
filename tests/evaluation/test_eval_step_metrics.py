"""Step AUROC (vs scikit-learn), ProcessBench first-error F1 (hand-computed and real data), diagnostics."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rewards.evaluation.step_metrics import (
    auroc,
    correct_answer_wrong_step_rate,
    first_error_index,
    lowest_step_on_last_rate,
    predict_first_errors,
    processbench_metrics,
    step_auroc,
    step_labels_from_ratings,
    weighted_auroc,
)

sklearn_metrics = pytest.importorskip("sklearn.metrics")
PROCESSBENCH_MATH = Path("/work/shared/data/processbench/math.json")


@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    ratings = rng.choice([-1, 0, 1], size=n, p=[0.3, 0.2, 0.5])
    scores = np.round(rng.random(n) + 0.3 * (ratings >= 0), 2)  # rounding makes ties
    assert step_auroc(scores, ratings) == pytest.approx(sklearn_metrics.roc_auc_score(ratings >= 0, scores), abs=1e-12)
    assert step_auroc(scores, ratings, neutral="negative") == pytest.approx(
        sklearn_metrics.roc_auc_score(ratings > 0, scores), abs=1e-12)
    keep = ratings != 0
    assert step_auroc(scores, ratings, neutral="exclude") == pytest.approx(
        sklearn_metrics.roc_auc_score(ratings[keep] > 0, scores[keep]), abs=1e-12)
    labels = rng.random(n) < 0.4
    assert step_auroc(scores, labels=labels) == pytest.approx(sklearn_metrics.roc_auc_score(labels, scores), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_the_one_auroc_matches_sklearn_with_ties_and_bootstrap_weights(seed):
    """The package's one AUROC (steps, solutions, baselines, bootstrap draws): equal to scikit-learn's, ties
    (few distinct scores) and per-draw weights (scikit-learn's sample_weight) included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(30, 300))
    positive = rng.random(n) < 0.35
    scores = rng.integers(0, 6, size=n) + positive * rng.integers(0, 2, size=n)  # six-odd values: many ties
    assert auroc(scores, positive) == pytest.approx(sklearn_metrics.roc_auc_score(positive, scores), abs=1e-12)
    weights = rng.multinomial(n, np.full(n, 1 / n), size=4).astype(float)  # four bootstrap draws
    drawn = weighted_auroc(scores.astype(float), positive, weights)
    for row, value in zip(weights, drawn, strict=True):
        expected = sklearn_metrics.roc_auc_score(positive, scores, sample_weight=row)
        assert value == pytest.approx(expected, abs=1e-12)
    assert math.isnan(auroc([0.3, 0.4], [True, True]))
    assert math.isnan(weighted_auroc(np.array([0.1, 0.2]), np.array([True, False]), np.array([[1.0, 0.0]]))[0])


def test_auroc_hand_cases_and_errors():
    assert step_auroc([0.9, 0.8, 0.1], [1, 0, -1]) == 1.0  # neutral counts as correct
    assert step_auroc([0.1, 0.9], [1, -1]) == 0.0
    assert step_auroc([0.5, 0.5], [1, -1]) == 0.5
    labels, keep = step_labels_from_ratings([-1, 0, 1])
    assert labels.tolist() == [False, True, True] and keep.all()
    with pytest.raises(ValueError, match="both positive and negative"):
        step_auroc([0.1, 0.2], [1, 0])
    with pytest.raises(ValueError):
        step_auroc([0.1], [1, -1])
    with pytest.raises(ValueError):
        step_labels_from_ratings([1], neutral="maybe")


def test_first_error_index():
    assert first_error_index([0.9, 0.7, 0.4, 0.2]) == 2
    assert first_error_index([0.9, 0.5, 0.6]) == -1  # 0.5 is not below 0.5
    assert first_error_index([0.9, 0.5, 0.6], threshold=0.55) == 1
    assert first_error_index([]) == -1
    assert predict_first_errors([[0.1], [0.9, 0.8], [0.9, 0.3]]).tolist() == [0, -1, 1]


def test_processbench_hand_computed():
    # erroneous solutions: labels 1, 2, 0 -> predictions 1 (hit), -1 (miss), 0 (hit): 2/3
    # correct solutions: labels -1, -1 -> predictions -1 (hit), 3 (miss): 1/2
    labels = [1, 2, 0, -1, -1]
    preds = [1, -1, 0, -1, 3]
    out = processbench_metrics(labels, preds)
    assert out["error_acc"] == pytest.approx(2 / 3) and out["correct_acc"] == pytest.approx(1 / 2)
    assert out["f1"] == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))
    assert (out["n_error"], out["n_correct"]) == (3, 2)
    scores = [[0.9, 0.2], [0.9, 0.8, 0.7], [0.1], [0.8, 0.9], [0.9, 0.9, 0.9, 0.4]]
    assert processbench_metrics(labels, step_scores=scores) == out
    assert processbench_metrics([1, -1], [0, 0])["f1"] == 0.0
    assert math.isnan(processbench_metrics([-1, -1], [-1, -1])["f1"])
    with pytest.raises(ValueError):
        processbench_metrics([1, -1], [0])


def test_processbench_real_data_oracle_and_degenerate():
    if not PROCESSBENCH_MATH.exists():
        pytest.skip("ProcessBench data not available")
    rows = json.loads(PROCESSBENCH_MATH.read_text())
    labels = [r["label"] for r in rows]
    # an oracle scorer (1 before the first error, 0 from it on) is perfect
    oracle = [[1.0 if (r["label"] == -1 or i < r["label"]) else 0.0 for i in range(len(r["steps"]))] for r in rows]
    out = processbench_metrics(labels, step_scores=oracle)
    assert out["f1"] == 1.0 and out["n_error"] + out["n_correct"] == len(rows) == 1000
    # a scorer that trusts everything gets every correct solution and no erroneous one: F1 = 0
    trusting = [[1.0] * len(r["steps"]) for r in rows]
    out = processbench_metrics(labels, step_scores=trusting)
    assert out["correct_acc"] == 1.0 and out["error_acc"] == 0.0 and out["f1"] == 0.0
    # flagging the last step always: erroneous solutions hit only when their error is the last step
    last = [[1.0] * (len(r["steps"]) - 1) + [0.0] for r in rows]
    out = processbench_metrics(labels, step_scores=last)
    expect = np.mean([r["label"] == len(r["steps"]) - 1 for r in rows if r["label"] != -1])
    assert out["error_acc"] == pytest.approx(expect) and out["correct_acc"] == 0.0
    # diagnostic on the real labels: right final answer although an expert found a wrong step
    ok = [r["final_answer_correct"] for r in rows]
    bad = [r["label"] != -1 for r in rows]
    rate = correct_answer_wrong_step_rate(ok, bad, among="correct_answer")
    assert rate == pytest.approx(sum(o and b for o, b in zip(ok, bad, strict=True)) / sum(ok)) and 0 < rate < 1


def test_diagnostics():
    answer_ok = [True, True, False, True]
    wrong_step = [True, False, True, False]
    assert correct_answer_wrong_step_rate(answer_ok, wrong_step) == 0.25
    assert correct_answer_wrong_step_rate(answer_ok, wrong_step, among="correct_answer") == pytest.approx(1 / 3)
    assert math.isnan(correct_answer_wrong_step_rate([False], [True], among="correct_answer"))
    solutions = [[0.9, 0.8, 0.1], [0.2, 0.9], [0.5], [0.3, 0.3], []]
    assert lowest_step_on_last_rate(solutions) == pytest.approx(3 / 4)  # empty solution skipped
    assert lowest_step_on_last_rate(solutions, ties="strict") == pytest.approx(2 / 4)
