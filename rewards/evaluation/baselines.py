"""Trivial scorers beside every reward model: a PRM figure means little until it beats rules that read no maths.

Four baselines, each a per-step "suspicion" value (higher = more likely wrong once its direction is applied):

* ``length``: the solution's running length in characters (a step's value is the length of the solution up to and
  including it), so a solution's flaw score is its total length and its predicted first error is the step where
  its length passes a cut;
* ``step_length``: the step's own length ("the first step longer than C characters is the first error");
* ``position``: the step's index (a solution's flaw score is its number of steps);
* ``random``: a seeded uniform draw per step.

Their free choices — the direction (is longer or shorter suspect?) and the cut — are made on **training**
solutions (:func:`fit`), never on the items they are judged on, as a head's threshold is. A fitted baseline turns
values into step scores in (0, 1) whose 0.5 is its cut (:func:`step_scores`), so every step-level figure of a PRM
(step AUROC, first-error F1 at 0.5, flawed-solution AUROC) applies to it unchanged. :func:`paired_step_figures`
computes those figures for a model and every baseline on the same bootstrap draws of problems as
``intervals.step_level_intervals`` (same seed, same units), with the paired model − baseline difference of each;
:func:`candidate_scores` gives a baseline's score for each best-of-N candidate (``best_of_n(baselines=...)``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .intervals import DRAWS, LEVEL, _bounds, _draws, _units
from .step_metrics import DEFAULT_THRESHOLD, auroc, calibrate_threshold, step_labels_from_ratings, weighted_auroc

__all__ = ["BASELINES", "BEST_OF_N_BASELINES", "NAMES", "Choice", "baseline_name", "baseline_verdicts",
           "best_of_n_baseline_verdict", "candidate_scores", "fit", "paired_auroc", "paired_step_figures",
           "step_scores", "step_values", "strongest"]

BASELINES = ("length", "step_length", "position", "random")
#: the baselines that pick a best-of-N candidate: a solution-level score (step length has none of its own)
BEST_OF_N_BASELINES = ("length", "position", "random")
NAMES = {"length": "solution length", "step_length": "step length", "position": "step position",
         "random": "random"}
#: the figures every scorer gets on held-out solutions
METRICS = ("step_auroc", "first_error_f1", "flawed_auroc")
METRIC_WORDS = {"step_auroc": "step AUROC", "first_error_f1": "first-error F1",
                "flawed_auroc": "flawed-solution AUROC"}
#: draws of the bootstrap processed together (a draw weighs every held-out step)
CHUNK = 64


@dataclass(frozen=True)
class Choice:
    """A baseline's free choices, made on training solutions: ``sign`` +1 when larger values are suspect (for step
    scores), ``solution_sign`` the same for a whole solution's flaw score (best-of-N), ``cut`` the value above which
    (after the sign) a step is flagged, ``scale`` the spread that maps values to scores."""

    name: str
    sign: float
    solution_sign: float
    cut: float
    scale: float
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Choice:
        return cls(name=str(data["name"]), sign=float(data["sign"]), solution_sign=float(data["solution_sign"]),
                   cut=float(data["cut"]), scale=float(data["scale"]), seed=int(data.get("seed", 0)))


def step_values(name: str, steps: Sequence[str], *, rng: np.random.Generator | None = None) -> np.ndarray:
    """Each step's raw value for baseline ``name`` (``rng`` for ``random``)."""
    lengths = np.array([len(step) for step in steps], dtype=float)
    if name == "length":
        return np.cumsum(lengths)
    if name == "step_length":
        return lengths
    if name == "position":
        return np.arange(len(steps), dtype=float)
    if name == "random":
        return (rng or np.random.default_rng(0)).random(len(steps))
    raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")


def _values(name: str, solutions: Sequence[Sequence[str]], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [step_values(name, steps, rng=rng) for steps in solutions]


def _first_errors(ratings: Sequence[Sequence[int]]) -> np.ndarray:
    return np.array([next((i for i, r in enumerate(rated) if r == -1), -1) for rated in ratings], dtype=np.int64)


def fit(name: str, solutions: Sequence[Sequence[str]], ratings: Sequence[Sequence[int]], *,
        neutral: str = "positive", seed: int = 0) -> Choice:
    """Baseline ``name``'s direction and cut, chosen on these training solutions: the direction whose step AUROC
    (and, for a whole solution, flawed-solution AUROC) is the higher (larger values suspect on a tie), the cut
    where first-error F1 peaks (``calibrate_threshold``, as a head's threshold is chosen)."""
    values = _values(name, solutions, seed)
    kept = [step_labels_from_ratings(rated, neutral) for rated in ratings]
    flat = np.concatenate([v[mask] for v, (_, mask) in zip(values, kept, strict=True)]) if values else np.zeros(0)
    truth = np.concatenate([y[mask] for y, mask in kept]).astype(bool) if values else np.zeros(0, dtype=bool)
    step = auroc(-flat, truth)  # larger values suspect: the score is minus the value
    sign = -1.0 if np.isfinite(step) and step < 0.5 else 1.0
    totals = np.array([v.max() if v.size else 0.0 for v in values])
    flawed = _first_errors(ratings) != -1
    whole = auroc(-totals, ~flawed)
    solution_sign = -1.0 if np.isfinite(whole) and whole < 0.5 else 1.0
    raw = [-sign * v for v in values]  # higher = more likely correct, as a PRM's scores
    threshold = calibrate_threshold(_first_errors(ratings), raw)["threshold"] if raw else None
    signed = sign * flat
    # no erroneous or no correct training solution: nothing to choose a cut on, so nothing training saw is flagged
    cut = float(signed.max()) if threshold is None and signed.size else (0.0 if threshold is None else -threshold)
    spread = float(np.median(np.abs(signed - cut))) if signed.size else 1.0
    return Choice(name=name, sign=sign, solution_sign=solution_sign, cut=cut, scale=max(spread, 1e-6), seed=seed)


def step_scores(choice: Choice, solutions: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """Per solution, each step's score in (0, 1), higher = more likely correct; below 0.5 exactly where the signed
    value passes the cut, so a step is flagged at 0.5 where the baseline's rule flags it."""
    out = []
    for values in _values(choice.name, solutions, choice.seed):
        distance = choice.sign * values - choice.cut
        out.append(0.5 - 0.5 * distance / (np.abs(distance) + choice.scale))
    return out


def candidate_scores(choice: Choice, solutions: Sequence[Sequence[str]]) -> np.ndarray:
    """One best-of-N score per candidate (higher = picked): minus its signed flaw value (total length, number of
    steps, a seeded draw)."""
    values = _values(choice.name, solutions, choice.seed)
    totals = np.array([v.max() if v.size else 0.0 for v in values], dtype=float)
    return -choice.solution_sign * totals


@dataclass
class _Scored:
    """One scorer's per-draw figures (draws,) and whole-data values."""

    values: dict[str, float]
    drawn: dict[str, np.ndarray]


def _score_figures(rows: Sequence[np.ndarray], ratings: Sequence[Sequence[int]], units: list[np.ndarray],
                   counts: np.ndarray, threshold: float, neutral: str, aggregation: str = "min") -> _Scored:
    kept = [step_labels_from_ratings(rated, neutral) for rated in ratings]
    unit_of = np.empty(len(rows), dtype=np.int64)
    for number, members in enumerate(units):
        unit_of[members] = number
    step_unit = np.concatenate([np.full(int(mask.sum()), unit_of[i]) for i, (_, mask) in enumerate(kept)])
    step_score = np.concatenate([r[mask] for r, (_, mask) in zip(rows, kept, strict=True)])
    step_truth = np.concatenate([y[mask] for y, mask in kept]).astype(bool)
    first = _first_errors(ratings)
    error = first != -1
    predicted = np.array([int(np.flatnonzero(r < threshold)[0]) if (r < threshold).any() else -1 for r in rows])
    hit = (predicted == first).astype(float)
    table = np.zeros((len(units), 4))
    np.add.at(table, unit_of, np.stack([hit * error, error, hit * ~error, ~error], axis=1).astype(float))
    drawn_counts = counts @ table
    whole_counts = table.sum(axis=0)

    def f1(c: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            error_acc, correct_acc = c[..., 0] / c[..., 1], c[..., 2] / c[..., 3]
        total = error_acc + correct_acc
        harmonic = np.where(total > 0, 2 * error_acc * correct_acc / np.where(total > 0, total, 1.0), 0.0)
        return np.where(np.isnan(total), np.nan, harmonic)  # no erroneous or no correct solution drawn: no F1

    solution_score = np.array([(r.prod() if aggregation == "product" else r.min()) if r.size else 1.0 for r in rows])
    values = {"step_auroc": auroc(step_score, step_truth), "first_error_f1": float(f1(whole_counts)),
              "flawed_auroc": auroc(solution_score, ~error)}
    step_draws, flawed_draws = [], []
    for start in range(0, counts.shape[0], CHUNK):
        block = counts[start:start + CHUNK]
        step_draws.append(weighted_auroc(step_score, step_truth, block[:, step_unit]))
        flawed_draws.append(weighted_auroc(solution_score, ~error, block[:, unit_of]))
    drawn = {"step_auroc": np.concatenate(step_draws), "first_error_f1": f1(drawn_counts),
             "flawed_auroc": np.concatenate(flawed_draws)}
    return _Scored(values, drawn)


def _interval(value: float, samples: np.ndarray, level: float) -> dict[str, float | None]:
    finite = samples[np.isfinite(samples)]
    if not np.isfinite(value) or finite.size == 0:
        return {"value": None, "low": None, "high": None}
    low, high = _bounds(finite, level)
    return {"value": float(value), "low": float(low), "high": float(high)}


def paired_step_figures(model_rows: Sequence[Sequence[float] | np.ndarray], ratings: Sequence[Sequence[int]],
                        solutions: Sequence[Sequence[str]], choices: Mapping[str, Choice], *,
                        groups: Sequence[str] | None = None, threshold: float = DEFAULT_THRESHOLD,
                        neutral: str = "positive", draws: int = DRAWS, seed: int = 0,
                        level: float = LEVEL, aggregation: str = "min") -> dict[str, Any]:
    """Step AUROC, first-error F1 and flawed-solution AUROC of the model (its first errors at ``threshold``, its
    solution score the ``aggregation`` of its step scores: ``min`` or ``product``) and of every baseline in
    ``choices`` (at its own cut; a key is a baseline's name, or ``name@where`` for a second choice of the same rule
    made elsewhere), each with an interval, and the paired model − baseline difference of each; all from the same
    draws of problems (``groups``) as ``step_level_intervals``.

    Returns ``{"model": {metric: {value, low, high}}, "baselines": {name: {metric: ..., "diff": {metric: ...}}},
    "strongest": {metric: name}, "choices": {name: Choice.to_dict()}, "draws", "seed", "level"}`` (fractions)."""
    rows = [np.asarray(r, dtype=float) for r in model_rows]
    units = _units(groups, len(rows))
    index = _draws(len(units), draws, seed)  # the same draws as step_level_intervals: same units, same seed
    counts = np.zeros((draws, len(units)))
    for number, draw in enumerate(index):
        counts[number] = np.bincount(draw, minlength=len(units))
    model = _score_figures(rows, ratings, units, counts, threshold, neutral, aggregation)
    doc: dict[str, Any] = {"model": {m: _interval(model.values[m], model.drawn[m], level) for m in METRICS},
                           "baselines": {}, "choices": {}, "draws": draws, "seed": seed, "level": level,
                           "threshold": threshold, "aggregation": aggregation}
    for name, choice in choices.items():
        scored = _score_figures(step_scores(choice, solutions), ratings, units, counts, DEFAULT_THRESHOLD, neutral)
        figures: dict[str, Any] = {m: _interval(scored.values[m], scored.drawn[m], level) for m in METRICS}
        figures["diff"] = {m: _interval(model.values[m] - scored.values[m], model.drawn[m] - scored.drawn[m], level)
                           for m in METRICS}
        doc["baselines"][name] = figures
        doc["choices"][name] = choice.to_dict()
    doc["strongest"] = {m: strongest({n: f[m] for n, f in doc["baselines"].items()}) for m in METRICS}
    return doc


def baseline_name(key: str) -> str:
    """A reader's name for a baseline key: ``step_length`` is "step length", ``step_length@dev half`` is "step
    length (chosen on the dev half)"."""
    rule, _, where = key.partition("@")
    return f"{NAMES[rule]} (chosen on the {where})" if where else NAMES[rule]


def paired_auroc(model: Sequence[float] | np.ndarray, other: Sequence[float] | np.ndarray,
                 positive: Sequence[bool] | np.ndarray, *, groups: Sequence[str] | None = None, draws: int = DRAWS,
                 seed: int = 0, level: float = LEVEL) -> dict[str, dict[str, float | None]]:
    """Two solution scorers' AUROC against ``positive`` and their paired difference, each with an interval, from
    the same draws of problems (``groups``) as :func:`paired_step_figures` (same units, same seed):
    ``{"model", "other", "diff"}``, each ``{value, low, high}``."""
    a, b = np.asarray(model, dtype=float), np.asarray(other, dtype=float)
    y = np.asarray(positive, dtype=bool)
    units = _units(groups, y.size)
    unit_of = np.empty(y.size, dtype=np.int64)
    for number, members in enumerate(units):
        unit_of[members] = number
    counts = np.zeros((draws, len(units)))
    for number, draw in enumerate(_draws(len(units), draws, seed)):
        counts[number] = np.bincount(draw, minlength=len(units))
    drawn_a = np.concatenate([weighted_auroc(a, y, counts[i:i + CHUNK][:, unit_of]) for i in range(0, draws, CHUNK)])
    drawn_b = np.concatenate([weighted_auroc(b, y, counts[i:i + CHUNK][:, unit_of]) for i in range(0, draws, CHUNK)])
    value_a, value_b = auroc(a, y), auroc(b, y)
    return {"model": _interval(value_a, drawn_a, level), "other": _interval(value_b, drawn_b, level),
            "diff": _interval(value_a - value_b, drawn_a - drawn_b, level)}


def strongest(figures: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The baseline with the highest value (None when none has one)."""
    valued = [(float(f["value"]), name) for name, f in figures.items() if f.get("value") is not None]
    return max(valued, key=lambda pair: pair[0])[1] if valued else None


def baseline_verdicts(doc: Mapping[str, Any], *, model: str = "PRM", level: float = LEVEL) -> list[str]:
    """Per metric, one sentence on the model against the strongest baseline there, from the paired interval: ahead,
    or plainly that it does not beat it."""
    sentences = []
    ci = f"{100 * level:g} % CI"
    for metric in METRICS:
        name = (doc.get("strongest") or {}).get(metric)
        if name is None:
            continue
        base = doc["baselines"][name]
        diff = base["diff"][metric]
        mine, theirs = (doc.get("model") or {}).get(metric) or {}, base[metric]
        if diff.get("value") is None or mine.get("value") is None:
            continue
        figures = (f"{100 * mine['value']:.1f} vs {100 * theirs['value']:.1f} %, {100 * diff['value']:+.1f} points, "
                   f"{ci} {100 * diff['low']:.1f} to {100 * diff['high']:.1f}")
        words, rule = METRIC_WORDS[metric], baseline_name(name)
        if diff["low"] > 0:
            sentences.append(f"{model} beats the strongest baseline on {words}, {rule} ({figures})")
        elif diff["high"] < 0:
            sentences.append(f"{model} does not beat the strongest baseline on {words}: {rule} is ahead ({figures})")
        else:
            sentences.append(f"{model} does not beat the strongest baseline on {words}: no difference from {rule} "
                             f"this data can show ({figures})")
    return sentences


def best_of_n_baseline_verdict(baselines: Mapping[str, Mapping[str, Mapping[str, float]]],
                               paired: Mapping[str, Mapping[str, Mapping[str, float]]], n: str, *,
                               model: str = "prm", level: float = LEVEL) -> str | None:
    """At N = ``n``: the strongest baseline there (highest mean accuracy) and, from the paired interval, whether the
    model beats it, said plainly when it does not; None without baselines or a paired figure."""
    means = {name: float(by_n[n]["mean"]) for name, by_n in baselines.items() if by_n and n in by_n}
    if not means:
        return None
    name = max(means, key=lambda key: means[key])
    figures = (paired.get(f"{model}-{name}") or {}).get(n)
    if not figures:
        return None
    who = model.upper()
    diff, low, high = 100 * figures["diff"], 100 * figures["low"], 100 * figures["high"]
    ci = f"{100 * level:g} % CI {low:.1f} to {high:.1f}"
    head = f"At N = {n} the strongest baseline is {NAMES[name]} ({100 * means[name]:.1f} %)"
    if low > 0:
        return f"{head}: the {who} beats it by {diff:.1f} points ({ci})"
    if high < 0:
        return f"{head}: the {who} does not beat it, the baseline is ahead by {-diff:.1f} points ({ci})"
    return f"{head}: the {who} does not beat it, no difference this data can show ({diff:+.1f} points, {ci})"
