"""Step-level metrics for process reward models (plain NumPy arrays in, floats out).

* :func:`step_auroc`: AUROC of predicted step scores against human step labels. PRM800K ratings are
  -1 / 0 / +1; by default the paper's *neutral-as-correct* rule applies: rating >= 0 is a positive
  (acceptable step), rating -1 a negative. ``neutral="negative"`` counts 0 as negative and
  ``neutral="exclude"`` drops neutral steps. :func:`auroc` and :func:`weighted_auroc` (one row per bootstrap
  draw) are the package's one AUROC: ties count half (the Mann-Whitney statistic), which equals
  ``sklearn.metrics.roc_auc_score``.
* ProcessBench (Zheng et al. 2024): the predicted first error of a solution is the first step whose
  score is below ``threshold`` (0.5 by default), -1 when there is none. On erroneous solutions
  (label != -1) accuracy is an exact index match; on correct ones (label == -1) the prediction must be
  -1; F1 is the harmonic mean of the two accuracies (reported as fractions, ProcessBench prints %).
* Diagnostics: share of selected solutions whose final answer is right although a step is wrong, and
  share of solutions whose lowest step score sits on the last step.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = [
    "DEFAULT_THRESHOLD",
    "auroc",
    "calibrate_threshold",
    "centre_on_threshold",
    "correct_answer_wrong_step_rate",
    "distinct_steps",
    "first_error_index",
    "lowest_step_on_last_rate",
    "predict_first_errors",
    "processbench_metrics",
    "sibling_pair_accuracy",
    "step_auroc",
    "step_labels_from_ratings",
    "weighted_auroc",
]


def step_labels_from_ratings(ratings: Sequence[int] | np.ndarray,
                             neutral: str = "positive") -> tuple[np.ndarray, np.ndarray]:
    """Ratings (-1/0/+1) -> (binary labels, mask of the steps kept).

    ``neutral="positive"`` (default, neutral-as-correct: rating >= 0 is positive), ``"negative"``
    (only +1 is positive) or ``"exclude"`` (neutral steps are dropped: mask False).
    """
    r = np.asarray(ratings, dtype=float).reshape(-1)
    if np.isnan(r).any():
        raise ValueError("ratings contain NaN/None")
    if neutral == "positive":
        return r >= 0, np.ones(r.shape, dtype=bool)
    if neutral == "negative":
        return r > 0, np.ones(r.shape, dtype=bool)
    if neutral == "exclude":
        return r > 0, r != 0
    raise ValueError(f"neutral must be 'positive', 'negative' or 'exclude', got {neutral!r}")


def weighted_auroc(scores: np.ndarray, positive: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """AUROC (ties count half: the Mann-Whitney statistic) of ``scores`` against ``positive`` under each row of
    ``weights`` (draws, items), NaN for a row that weighs no positive or no negative. A bootstrap draw is the
    items weighted by how often their unit was drawn, so the scores are sorted once for every draw."""
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    starts = np.flatnonzero(np.concatenate([[True], sorted_scores[1:] != sorted_scores[:-1]]))
    y = positive[order].astype(float)
    w = weights[:, order]
    pos = np.add.reduceat(w * y, starts, axis=1)
    neg = np.add.reduceat(w * (1.0 - y), starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg
    numerator = (pos * (below + 0.5 * neg)).sum(axis=1)
    denominator = pos.sum(axis=1) * neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def auroc(scores: Sequence[float] | np.ndarray, positive: Sequence[bool] | np.ndarray) -> float:
    """AUROC of ``scores`` (higher = more likely positive) against ``positive``; NaN without both classes."""
    s = np.asarray(scores, dtype=float).reshape(-1)
    y = np.asarray(positive, dtype=bool).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"{s.shape[0]} scores but {y.shape[0]} labels")
    return float(weighted_auroc(s, y, np.ones((1, s.size)))[0]) if s.size else float("nan")


def step_auroc(
    scores: Sequence[float] | np.ndarray,
    ratings: Sequence[int] | np.ndarray | None = None,
    *,
    labels: Sequence[bool] | np.ndarray | None = None,
    neutral: str = "positive",
) -> float:
    """AUROC of step scores (higher = more likely correct) vs human ratings (or binary ``labels``)."""
    s = np.asarray(scores, dtype=float).reshape(-1)
    if (ratings is None) == (labels is None):
        raise ValueError("pass exactly one of ratings or labels")
    if ratings is not None:
        y, keep = step_labels_from_ratings(ratings, neutral)
    else:
        y = np.asarray(labels, dtype=bool).reshape(-1)
        keep = np.ones(y.shape, dtype=bool)
    if y.shape != s.shape:
        raise ValueError(f"{s.shape[0]} scores but {y.shape[0]} labels")
    s, y = s[keep], y[keep]
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite")
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUROC needs both positive and negative steps")
    return auroc(s, y)


def first_error_index(step_scores: Sequence[float] | np.ndarray, threshold: float = 0.5) -> int:
    """Index of the first step scored below ``threshold``; -1 when every step is at or above it."""
    s = np.asarray(step_scores, dtype=float).reshape(-1)
    below = np.flatnonzero(s < threshold)
    return int(below[0]) if below.size else -1


def predict_first_errors(step_scores: Iterable[Sequence[float] | np.ndarray], threshold: float = 0.5) -> np.ndarray:
    return np.array([first_error_index(s, threshold) for s in step_scores], dtype=np.int64)


def processbench_metrics(
    labels: Sequence[int] | np.ndarray,
    predictions: Sequence[int] | np.ndarray | None = None,
    *,
    step_scores: Iterable[Sequence[float] | np.ndarray] | None = None,
    threshold: float = 0.5,
) -> dict[str, float | int]:
    """ProcessBench first-error identification.

    ``labels``: index of the earliest wrong step, -1 for a fully correct solution. Give either the
    predicted indices or the per-step scores (then thresholded with :func:`first_error_index`).
    Returns ``{"error_acc", "correct_acc", "f1", "n_error", "n_correct"}``; an accuracy over an empty
    group is NaN (and so is F1); F1 is 0 when both accuracies are 0.
    """
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    if (predictions is None) == (step_scores is None):
        raise ValueError("pass exactly one of predictions or step_scores")
    pred = (predict_first_errors(step_scores, threshold) if step_scores is not None
            else np.asarray(predictions, dtype=np.int64).reshape(-1))
    if pred.shape != y.shape:
        raise ValueError(f"{y.shape[0]} labels but {pred.shape[0]} predictions")
    err = y != -1
    error_acc = float((pred[err] == y[err]).mean()) if err.any() else float("nan")
    correct_acc = float((pred[~err] == -1).mean()) if (~err).any() else float("nan")
    if np.isnan(error_acc) or np.isnan(correct_acc):
        f1 = float("nan")
    elif error_acc + correct_acc == 0:
        f1 = 0.0
    else:
        f1 = 2 * error_acc * correct_acc / (error_acc + correct_acc)
    return {"error_acc": error_acc, "correct_acc": correct_acc, "f1": f1,
            "n_error": int(err.sum()), "n_correct": int((~err).sum())}


DEFAULT_THRESHOLD = 0.5
#: candidate thresholds tried by :func:`calibrate_threshold`: every distinct score (just at and just above it) up
#: to this many, else as many quantiles; plus 0.5
CALIBRATION_POINTS = 4000


def calibrate_threshold(first_errors: Sequence[int] | np.ndarray,
                        step_scores: Sequence[Sequence[float] | np.ndarray]) -> dict[str, float | None]:
    """The first-error threshold that maximises first-error F1 on these (validation) solutions.

    With rare negatives a PRM's P(correct) rarely falls under 0.5, so at 0.5 it flags no step (F1 0) although its
    ranking is good: the threshold is chosen where F1 peaks (ties: the one closest to 0.5). Returns
    ``{"threshold", "f1_calibrated", "f1_at_default"}`` (the F1s on these solutions); threshold None when F1
    cannot be computed (no erroneous or no correct solution among them).
    """
    labels = np.asarray(first_errors, dtype=np.int64).reshape(-1)
    rows = [np.asarray(s, dtype=float).reshape(-1) for s in step_scores]
    if not rows or not (labels != -1).any() or not (labels == -1).any():
        return {"threshold": None, "f1_calibrated": None, "f1_at_default": None}
    flat = np.unique(np.concatenate(rows))
    if flat.size > CALIBRATION_POINTS:
        flat = np.quantile(flat, np.linspace(0, 1, CALIBRATION_POINTS))
    candidates = np.unique(np.concatenate([flat, [DEFAULT_THRESHOLD]]))
    # a threshold just above a score flags that score: the midpoints between candidates are where F1 changes
    candidates = np.unique(np.concatenate([candidates, np.nextafter(candidates, np.inf)]))

    # per solution and candidate: is the predicted first error (first step under the threshold) right?
    hits_error = np.zeros(candidates.size)
    hits_correct = np.zeros(candidates.size)
    for label, scores in zip(labels, rows, strict=True):
        running = -np.minimum.accumulate(scores)  # non-decreasing: the first step under t is where it passes -t
        predicted = np.searchsorted(running, -candidates, side="right")
        if label == -1:
            hits_correct += predicted == scores.size
        else:
            hits_error += predicted == label
    error_acc = hits_error / (labels != -1).sum()
    correct_acc = hits_correct / (labels == -1).sum()
    total = error_acc + correct_acc
    f1 = np.divide(2 * error_acc * correct_acc, total, out=np.zeros_like(total), where=total > 0)
    best = int(np.lexsort((-np.abs(candidates - DEFAULT_THRESHOLD), f1))[-1])
    at_default = processbench_metrics(labels, step_scores=rows, threshold=DEFAULT_THRESHOLD)["f1"]
    return {"threshold": float(candidates[best]), "f1_calibrated": float(f1[best]),
            "f1_at_default": None if np.isnan(at_default) else float(at_default)}


def centre_on_threshold(score: float, threshold: float) -> float:
    """A PRM score mapped so that its calibrated threshold lands on 0.5 (piecewise linear, order kept, [0, 1]):
    where a score becomes a hard label at 0.5 (machine step labels), a calibrated PRM's cut is honoured."""
    score = min(max(float(score), 0.0), 1.0)
    if not 0.0 < threshold < 1.0:
        return score
    if score < threshold:
        return 0.5 * score / threshold
    return 0.5 + 0.5 * (score - threshold) / (1.0 - threshold)


def correct_answer_wrong_step_rate(
    answer_correct: Sequence[bool] | np.ndarray,
    has_wrong_step: Sequence[bool] | np.ndarray,
    among: str = "all",
) -> float:
    """Share of (selected) solutions with the right final answer but at least one wrong step.

    ``among="all"``: over all given solutions; ``among="correct_answer"``: over those with the right
    answer only (how often a right answer hides a wrong step). NaN when the denominator is empty.
    """
    a = np.asarray(answer_correct, dtype=bool).reshape(-1)
    w = np.asarray(has_wrong_step, dtype=bool).reshape(-1)
    if a.shape != w.shape:
        raise ValueError("answer_correct and has_wrong_step differ in length")
    hit = a & w
    if among == "all":
        return float(hit.mean()) if a.size else float("nan")
    if among == "correct_answer":
        return float(hit[a].mean()) if a.any() else float("nan")
    raise ValueError("among must be 'all' or 'correct_answer'")


def lowest_step_on_last_rate(step_scores: Iterable[Sequence[float]], ties: str = "any") -> float:
    """Share of solutions (with at least one step) whose lowest step score is on the last step.

    ``ties="any"``: the last step counts when it attains the minimum (also when shared);
    ``ties="strict"``: only when it is strictly below every earlier step (a one-step solution counts).
    """
    if ties not in ("any", "strict"):
        raise ValueError("ties must be 'any' or 'strict'")
    hits = total = 0
    for scores in step_scores:
        s = np.asarray(scores, dtype=float).reshape(-1)
        if s.size == 0:
            continue
        total += 1
        last, rest = s[-1], s[:-1]
        hits += bool(rest.size == 0 or (last <= rest.min() if ties == "any" else last < rest.min()))
    return hits / total if total else float("nan")


def distinct_steps(prompts: Sequence[str], solutions: Sequence[Sequence[str]], step_scores: Sequence[Sequence[float]],
                   ratings: Sequence[Sequence[int]]) -> tuple[list[float], list[int]]:
    """(scores, ratings) of each distinct (problem, prefix, step) once: a rated alternative's row repeats the chosen
    prefix before it, so scoring every row counts that prefix's steps once per alternative (the first copy is
    kept)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    scores: list[float] = []
    kept: list[int] = []
    for prompt, steps, scored, rated in zip(prompts, solutions, step_scores, ratings, strict=True):
        for index, (score, rating) in enumerate(zip(scored, rated, strict=True)):
            key = (prompt, tuple(steps[:index + 1]))
            if key not in seen:
                seen.add(key)
                scores.append(float(score))
                kept.append(int(rating))
    return scores, kept


def sibling_pair_accuracy(prompts: Sequence[str], solutions: Sequence[Sequence[str]],
                          step_scores: Sequence[Sequence[float]], ratings: Sequence[Sequence[int]],
                          neutral: str = "positive") -> dict[str, float | int | None]:
    """Share of sibling pairs — two different steps after the same problem and prefix, one acceptable and one
    wrong (``neutral`` as in :func:`step_labels_from_ratings`) — where the acceptable one scores higher (a tie
    counts half): the in-context figure, free of how hard the problem is or how far the solution has come.
    ``{"accuracy", "pairs", "contexts"}``; accuracy None without pairs."""
    siblings: dict[tuple[str, tuple[str, ...]], dict[str, tuple[float, bool]]] = {}
    for prompt, steps, scored, rated in zip(prompts, solutions, step_scores, ratings, strict=True):
        labels, keep = step_labels_from_ratings(rated, neutral)
        for index, step in enumerate(steps):
            if keep[index]:
                siblings.setdefault((prompt, tuple(steps[:index])), {}).setdefault(
                    step, (float(scored[index]), bool(labels[index])))
    total = 0.0
    pairs = contexts = 0
    for options in siblings.values():
        good = np.array([score for score, ok in options.values() if ok])
        bad = np.array([score for score, ok in options.values() if not ok])
        if good.size and bad.size:
            contexts += 1
            pairs += good.size * bad.size
            total += float((good[:, None] > bad[None, :]).sum() + 0.5 * (good[:, None] == bad[None, :]).sum())
    return {"accuracy": total / pairs if pairs else None, "pairs": pairs, "contexts": contexts}
