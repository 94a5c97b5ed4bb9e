"""Confidence intervals and a verdict a reader can act on (plain NumPy, no Django).

A best-of-N figure over 30 problems moves by several points between draws of the problems; a step-level figure
over 200 held-out solutions by a few hundredths. So every figure carries a percentile bootstrap interval:

* best-of-N: over **problems** (each problem's expected accuracy at N, per method, resampled with replacement);
* PRM − ORM and PRM − majority: a **paired** bootstrap, the same problem draws for both methods, so the
  problems' difficulty cancels out of the difference;
* the first-error F1 at a threshold calibrated **on other held-out problems**: beside the stored threshold (a
  head's is chosen on its training problems, a fine-tuned model's on its validation split), ``crossfit_hits``
  chooses each fifth of the scored problems' threshold on the other four fifths: what a threshold drawn from
  problems like these buys on solutions it has not seen;
* step-level figures: over **held-out problems** where the solutions name theirs (a problem's solutions and their
  steps stay together), else over held-out solutions. Solutions to one problem are not independent draws: an
  ``alternatives`` export repeats each chosen prefix in every rated alternative's row after it, and one problem's
  paths share its difficulty. Resampled as if independent, the demo's 3,433 held-out rows (103 problems) gave its
  step AUROC an interval of ±1.3 points; drawn by problem, ±4.

Every bootstrap is seeded: the same data and seed give the same interval, another seed or other data another.
``verdict`` turns the paired intervals into sentences, ``threshold_verdict`` the paired interval of what the stored
threshold buys over 0.5 (both F1s from the same draws); ``no_flag_advice`` says what to do when the PRM flags no
step at all.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .step_metrics import (
    DEFAULT_THRESHOLD,
    auroc,
    calibrate_threshold,
    processbench_metrics,
    step_labels_from_ratings,
)

__all__ = ["DRAWS", "LEVEL", "best_of_n_intervals", "crossfit_hits", "curve_falls", "no_flag_advice",
           "step_level_intervals", "threshold_verdict", "verdict"]

DRAWS = 1000
LEVEL = 0.95
#: bootstrap draws of the threshold's calibration (each one searches every candidate threshold)
THRESHOLD_DRAWS = 200
#: folds over the held-out problems for the cross-fitted first-error F1 (fewer problems: one fold each)
CROSSFIT_FOLDS = 5
PAIRS = (("prm", "orm"), ("prm", "majority"))
#: the N a best-of-N curve's end is compared with: where the paper's curves still rise
CURVE_FROM = 8
NAMES = {"prm": "PRM", "orm": "ORM", "majority": "majority vote", "pass": "pass@N"}


def _draws(units: int, draws: int, seed: int) -> np.ndarray:
    """(draws, units) indices of units drawn with replacement."""
    return np.random.default_rng(seed).integers(0, units, size=(draws, units))


def _bounds(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1 - level) / 2
    return np.quantile(samples, tail, axis=0), np.quantile(samples, 1 - tail, axis=0)


def best_of_n_intervals(per_problem: Mapping[str, np.ndarray], ns: Sequence[int], *, draws: int = DRAWS,
                        seed: int = 0, level: float = LEVEL,
                        pairs: Sequence[tuple[str, str]] = PAIRS) -> dict[str, Any]:
    """Intervals of every method's best-of-N accuracy and the paired PRM − ORM / PRM − majority differences.

    ``per_problem[method]`` is a (problems, len(ns)) array of each problem's expected accuracy at each N.
    Returns ``{"methods": {m: {"N": {"low", "high"}}}, "paired": {"prm-orm": {"N": {"diff", "low", "high"}}},
    "draws", "seed", "level", "unit": "problems", "problems"}`` (fractions, like the means).
    """
    problems = next(iter(per_problem.values())).shape[0] if per_problem else 0
    doc: dict[str, Any] = {"methods": {}, "paired": {}, "draws": draws, "seed": seed, "level": level,
                           "unit": "problems", "problems": problems}
    if problems == 0:
        return doc
    index = _draws(problems, draws, seed)  # one set of draws for every method: the pairs share it
    for method, values in per_problem.items():
        low, high = _bounds(values[index].mean(axis=1), level)
        doc["methods"][method] = {str(n): {"low": float(low[j]), "high": float(high[j])} for j, n in enumerate(ns)}
    # does more choice hurt? accuracy at the largest N minus at N = 8, paired over the same problem draws
    doc["curve"] = {}
    if CURVE_FROM in ns and int(ns[-1]) > CURVE_FROM:
        start = list(ns).index(CURVE_FROM)
        for method in ("prm", "orm"):
            if method in per_problem:
                change = per_problem[method][:, -1] - per_problem[method][:, start]
                low, high = _bounds(change[index].mean(axis=1), level)
                doc["curve"][method] = {"from": str(CURVE_FROM), "to": str(ns[-1]), "diff": float(change.mean()),
                                        "low": float(low), "high": float(high)}
    for first, second in pairs:
        if first not in per_problem or second not in per_problem:
            continue
        difference = per_problem[first] - per_problem[second]
        low, high = _bounds(difference[index].mean(axis=1), level)
        doc["paired"][f"{first}-{second}"] = {
            str(n): {"diff": float(difference[:, j].mean()), "low": float(low[j]), "high": float(high[j])}
            for j, n in enumerate(ns)}
    return doc


def _points(value: float) -> str:
    return f"{100 * value:.1f}"


def _lead(pair: tuple[str, str], figures: Mapping[str, float], names: Mapping[str, str],
          percent: str) -> tuple[str, str, str]:
    """(who is ahead of whom, by how much, its interval) for one N whose interval excludes 0."""
    first, second = pair
    if figures["low"] > 0:
        ahead, behind, diff, low, high = first, second, figures["diff"], figures["low"], figures["high"]
    else:
        ahead, behind, diff, low, high = second, first, -figures["diff"], -figures["high"], -figures["low"]
    ci = f"{percent} CI {_points(low)}–{_points(high)}"
    return f"{names[ahead]} ahead of {names[behind]}", f"{_points(diff)} points", ci


def _ns_words(ns: Sequence[str]) -> str:
    return ", ".join(ns[:-1]) + f" and {ns[-1]}" if len(ns) > 1 else ns[0]


def verdict(paired: Mapping[str, Mapping[str, Mapping[str, float]]], *, level: float = LEVEL,
            names: Mapping[str, str] = NAMES) -> list[str]:
    """One sentence per pair (of the methods ``names`` knows; PRM − baseline pairs have their own sentences) that
    sums up every N: who is ahead at the largest N, or that no difference shows there; the other Ns where one is
    ahead; and between which Ns the lead changes sign."""
    sentences = []
    percent = f"{100 * level:g} %"
    for key, by_n in paired.items():
        first, second = key.split("-", 1)
        if not by_n or first not in names or second not in names:
            continue
        ns = sorted(by_n, key=int)
        sign = {n: 1 if by_n[n]["low"] > 0 else -1 if by_n[n]["high"] < 0 else 0 for n in ns}
        clear = [n for n in ns if sign[n]]
        last = by_n[ns[-1]]
        if not clear:
            sentences.append(f"{names[first]} vs {names[second]}: no difference this data can show at N ≤ {ns[-1]} "
                             f"(at N = {ns[-1]}: {float(last['diff']) * 100:+.1f} points, {percent} CI "
                             f"{_points(last['low'])} to {_points(last['high'])})")
            continue

        parts = []
        if sign[ns[-1]]:
            who, by, ci = _lead((first, second), last, names, percent)
            parts.append(f"{who} at N = {ns[-1]} by {by} ({ci})")
        else:
            parts.append(f"{names[first]} vs {names[second]} at N = {ns[-1]}, the largest: no difference this data "
                         f"can show ({float(last['diff']) * 100:+.1f} points, {percent} CI {_points(last['low'])} to "
                         f"{_points(last['high'])})")
        for direction in (1, -1):
            earlier = [n for n in clear[:-1] if sign[n] == direction] if sign[ns[-1]] else \
                [n for n in clear if sign[n] == direction]
            if not earlier or (sign[ns[-1]] == direction):
                continue
            who, by, ci = _lead((first, second), by_n[earlier[-1]], names, percent)
            parts.append(f"{who} at N = {_ns_words(earlier)} (at N = {earlier[-1]} by {by}, {ci})")
        flips = [(a, b) for a, b in zip(clear, clear[1:], strict=False) if sign[a] != sign[b]]
        if flips:
            parts.append("the lead changes sign between " + ", ".join(f"N = {a} and N = {b}" for a, b in flips))
        sentences.append("; ".join(parts))
    return sentences


def _first_error_hits(labels: np.ndarray, rows: list[np.ndarray], threshold: float) -> np.ndarray:
    """Per solution: is the predicted first error (at ``threshold``) the true one?"""
    predicted = np.array([int(np.flatnonzero(r < threshold)[0]) if (r < threshold).any() else -1 for r in rows])
    return predicted == labels


def _f1(error_acc: np.ndarray, correct_acc: np.ndarray) -> np.ndarray:
    total = error_acc + correct_acc
    return np.divide(2 * error_acc * correct_acc, total, out=np.zeros_like(total), where=total > 0)


def _units(groups: Sequence[str] | None, solutions: int) -> list[np.ndarray]:
    """The bootstrap's units, each the indices of its solutions: one per distinct group (in order of first
    appearance), or one per solution when there are no groups."""
    if groups is None:
        return [np.array([i]) for i in range(solutions)]
    if len(groups) != solutions:
        raise ValueError(f"{len(groups)} groups for {solutions} solutions")
    members: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    return [np.array(indices) for indices in members.values()]


def crossfit_hits(first_errors: np.ndarray, rows: list[np.ndarray], units: list[np.ndarray], *,
                  folds: int = CROSSFIT_FOLDS, seed: int = 0) -> np.ndarray | None:
    """Per solution: is its predicted first error right at the threshold calibrated on the other folds' units
    (problems)? Units are dealt to ``folds`` folds (one per unit when there are fewer) by a seeded shuffle; a fold
    whose outside has no erroneous or no correct solution uses 0.5. None for fewer than two units."""
    if len(units) < 2:
        return None
    folds = min(folds, len(units))
    fold_of = np.random.default_rng(seed).permutation(len(units)) % folds
    hits = np.zeros(len(rows), dtype=bool)
    for fold in range(folds):
        inside = np.concatenate([units[u] for u in np.flatnonzero(fold_of == fold)])
        outside = np.concatenate([units[u] for u in np.flatnonzero(fold_of != fold)])
        threshold = calibrate_threshold(first_errors[outside], [rows[i] for i in outside])["threshold"]
        hits[inside] = _first_error_hits(first_errors[inside], [rows[i] for i in inside],
                                         DEFAULT_THRESHOLD if threshold is None else threshold)
    return hits


def _no_figure() -> dict[str, Any]:
    return {"value": None, "low": None, "high": None}


@dataclass(frozen=True)
class _Resampled:
    """Scored solutions, their true first errors (-1: none) and the bootstrap's draws of their units."""

    rows: list[np.ndarray]
    first_errors: np.ndarray
    units: list[np.ndarray]
    index: np.ndarray  # (draws, units): units drawn with replacement
    level: float

    @property
    def error(self) -> np.ndarray:
        return self.first_errors != -1

    def figure(self, value: float, samples: np.ndarray) -> dict[str, Any]:
        """``value`` with the interval of its finite bootstrap samples (all None when either is missing)."""
        finite = samples[np.isfinite(samples)]
        if np.isnan(value) or finite.size == 0:
            return _no_figure()
        low, high = _bounds(finite, self.level)
        return {"value": float(value), "low": float(low), "high": float(high)}

    def accuracies(self, hits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each draw's first-error accuracy on erroneous solutions and "no error" accuracy on correct ones."""
        hit, error = hits.astype(float), self.error
        # per unit: first errors found, erroneous solutions, right "no error" calls, correct solutions
        counts = np.array([((hit * error)[unit].sum(), error[unit].sum(), (hit * ~error)[unit].sum(),
                            (~error)[unit].sum()) for unit in self.units], dtype=float).reshape(len(self.units), 4)
        drawn = counts[self.index].sum(axis=1)  # (draws, 4)
        with np.errstate(invalid="ignore", divide="ignore"):
            return drawn[:, 0] / drawn[:, 1], drawn[:, 2] / drawn[:, 3]

    def solutions_of(self, draw: np.ndarray) -> np.ndarray:
        return np.concatenate([self.units[u] for u in draw]) if len(draw) else np.zeros(0, dtype=int)


def _step_auroc(data: _Resampled, labels_mask: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, np.ndarray]:
    """Step AUROC over every labeled step, and in each draw over the drawn solutions' labeled steps."""
    rows, units = data.rows, data.units
    scores_kept = [r[mask] for r, (_, mask) in zip(rows, labels_mask, strict=True)]
    truth_kept = [y[mask] for y, mask in labels_mask]
    all_scores = np.concatenate(scores_kept) if rows else np.zeros(0)
    all_truth = np.concatenate(truth_kept).astype(bool) if rows else np.zeros(0, dtype=bool)
    unit_scores = [np.concatenate([scores_kept[i] for i in unit]) for unit in units]
    unit_truth = [np.concatenate([truth_kept[i] for i in unit]).astype(bool) for unit in units]
    aurocs = np.array([auroc(np.concatenate([unit_scores[u] for u in draw]),
                             np.concatenate([unit_truth[u] for u in draw])) for draw in data.index])
    return auroc(all_scores, all_truth), aurocs


def _first_error_figures(data: _Resampled,
                         point: float) -> tuple[dict[str, dict[str, Any]], tuple[float, np.ndarray]]:
    """The first-error figures at threshold ``point``, and its F1 on all solutions and in each draw."""
    error_acc, correct_acc = data.accuracies(_first_error_hits(data.first_errors, data.rows, point))
    whole = processbench_metrics(data.first_errors, step_scores=data.rows, threshold=point) if data.rows else None
    f1 = (whole["f1"] if whole else float("nan"), _f1(error_acc, correct_acc))
    return {"first_error_acc": data.figure(whole["error_acc"] if whole else float("nan"), error_acc),
            "no_error_acc": data.figure(whole["correct_acc"] if whole else float("nan"), correct_acc),
            "first_error_f1": data.figure(*f1)}, f1


def _crossfit_figures(data: _Resampled, seed: int) -> dict[str, Any]:
    error = data.error
    crossfit = crossfit_hits(data.first_errors, data.rows, data.units, seed=seed) if error.any() and (
        ~error).any() else None
    if crossfit is None:
        return {"crossfit_folds": None, "first_error_f1_crossfit": _no_figure()}
    error_acc, correct_acc = data.accuracies(crossfit)
    value = _f1(np.array([crossfit[error].mean()]), np.array([crossfit[~error].mean()]))[0]
    return {"crossfit_folds": min(CROSSFIT_FOLDS, len(data.units)),
            "first_error_f1_crossfit": data.figure(float(value), _f1(error_acc, correct_acc))}


def _threshold_samples(data: _Resampled) -> np.ndarray:
    """The threshold calibrated again in each of the first ``THRESHOLD_DRAWS`` draws (NaN where none is)."""
    return np.array([calibrate_threshold(data.first_errors[d], [data.rows[i] for i in d])["threshold"] or np.nan
                     for d in map(data.solutions_of, data.index[:THRESHOLD_DRAWS])], dtype=float)


def step_level_intervals(step_scores: Sequence[Sequence[float] | np.ndarray], ratings: Sequence[Sequence[int]], *,
                         groups: Sequence[str] | None = None, neutral: str = "positive",
                         threshold: float | None = None, draws: int = DRAWS, seed: int = 0,
                         level: float = LEVEL) -> dict[str, Any]:
    """Step AUROC, first-error accuracies and F1 (at 0.5 and at ``threshold``), each with an interval; ``groups``
    (each solution's problem): the bootstrap draws problems, each with all its solutions, else it draws
    solutions. ``threshold`` None: calibrated here (with its own interval). Values are fractions; a figure the
    data cannot give (no negative step, no erroneous solution) is None."""
    rows = [np.asarray(s, dtype=float) for s in step_scores]
    first_errors = np.array([next((i for i, r in enumerate(rated) if r == -1), -1) for rated in ratings])
    calibration = calibrate_threshold(first_errors, rows) if threshold is None else None
    chosen = threshold if threshold is not None else (calibration or {}).get("threshold")
    labels_mask = [step_labels_from_ratings(rated, neutral) for rated in ratings]
    units = _units(groups, len(rows))
    data = _Resampled(rows, first_errors, units, _draws(len(units), draws, seed), level)
    figures: dict[str, Any] = {"unit": "solutions" if groups is None else "problems", "solutions": len(rows),
                               "problems": None if groups is None else len(units), "draws": draws, "seed": seed,
                               "level": level, "threshold": chosen, "threshold_source": "model"
                               if threshold is not None else "held-out"}
    figures["step_auroc"] = data.figure(*_step_auroc(data, labels_mask))
    f1_draws: dict[str, tuple[float, np.ndarray]] = {}  # per threshold: F1 on all solutions and in each draw
    for suffix, point in (("", DEFAULT_THRESHOLD), ("_calibrated", chosen)):
        if point is None:
            figures.update({name + suffix: _no_figure() for name in ("first_error_acc", "no_error_acc",
                                                                     "first_error_f1")})
            continue
        at_point, f1_draws[suffix] = _first_error_figures(data, float(point))
        figures.update({name + suffix: figure for name, figure in at_point.items()})
    # what the chosen threshold buys over 0.5, paired: both F1s from the same draws, so the problems cancel out
    if "" in f1_draws and "_calibrated" in f1_draws:
        (at_default, default_draws), (at_chosen, chosen_draws) = f1_draws[""], f1_draws["_calibrated"]
        figures["first_error_f1_gain"] = data.figure(at_chosen - at_default, chosen_draws - default_draws)
    else:
        figures["first_error_f1_gain"] = _no_figure()
    figures.update(_crossfit_figures(data, seed))
    if calibration is not None and chosen is not None:
        figures["threshold_interval"] = data.figure(chosen, _threshold_samples(data))
    figures["flags_no_step"] = bool(rows) and not any((r < DEFAULT_THRESHOLD).any() for r in rows)
    return figures


def threshold_verdict(figures: Mapping[str, Any], *, fractions: bool = False, level: float = LEVEL) -> str | None:
    """One sentence on what the PRM's threshold buys over 0.5 in first-error F1 on the scored solutions, from the
    paired interval ``first_error_f1_gain``, in percent and points (``fractions``: as fractions, for a page whose
    figures are fractions); None when there is no such figure (no threshold, no erroneous or no correct solution,
    or figures computed before the gain was)."""
    gain = figures.get("first_error_f1_gain") or {}
    threshold = figures.get("threshold")
    if gain.get("value") is None or threshold is None:
        return None
    value, low, high = float(gain["value"]), float(gain["low"]), float(gain["high"])

    def number(x: float, sign: str = "") -> str:
        return f"{x:{sign}.3f}" if fractions else f"{100 * x:{sign}.1f}"

    unit = "" if fractions else " points"
    where = "stored with the PRM" if figures.get("threshold_source") == "model" else "calibrated on these solutions"
    chosen = f"the threshold {where} ({number(float(threshold))}{'' if fractions else ' %'})"
    ci = f"{100 * level:g} % CI"
    if low > 0:
        return f"First-error F1 at {chosen} beats 0.5 by {number(value)}{unit} ({ci} {number(low)}–{number(high)})"
    if high < 0:
        return (f"First-error F1 at 0.5 beats {chosen} by {number(-value)}{unit} "
                f"({ci} {number(-high)}–{number(-low)})")
    return (f"First-error F1 at {chosen} vs 0.5: no difference this data can show ({number(value, '+')}{unit}, "
            f"{ci} {number(low)} to {number(high)})")


def no_flag_advice(figures: Mapping[str, Any]) -> str | None:
    """What to say when the PRM flags no step at 0.5 (first-error F1 0): None when it does flag steps."""
    if not figures.get("flags_no_step"):
        return None
    threshold = figures.get("threshold")
    calibrated = (figures.get("first_error_f1_calibrated") or {}).get("value")
    using = (f"the calibrated threshold ({threshold:.3f}) gives first-error F1 {calibrated:.3f}"
             if threshold is not None and calibrated is not None else
             "a threshold calibrated on held-out labels (it needs erroneous and correct solutions there)")
    return (f"At the fixed threshold 0.5 this PRM flags no step on the held-out solutions, so its first-error F1 "
            f"at 0.5 is 0. What would help: {using}; more labels, −1 steps especially; a larger training budget.")


def curve_falls(curve: Mapping[str, Mapping[str, Any]], *, level: float = LEVEL) -> list[str]:
    """One sentence per reward model whose best-of-N accuracy at the largest N lies below its accuracy at N = 8 with
    the whole paired interval below 0: more candidates make it choose worse."""
    sentences = []
    for method, figures in curve.items():
        if figures["high"] < 0:
            sentences.append(f"{NAMES[method]} best-of-N falls as N grows: at N = {figures['to']} it is "
                             f"{_points(-figures['diff'])} points below N = {figures['from']} ({100 * level:g} % CI "
                             f"{_points(-figures['high'])}–{_points(-figures['low'])}): more candidates give it more "
                             "wrong answers it prefers")
    return sentences
