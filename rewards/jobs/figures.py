"""The dashboard's figures as rows, from stored results: best-of-N, per domain, step level with the baselines,
history; every figure in percent with its interval, and the words the pages put beside them.

Plain reads of rows already fetched (the selectors fetch them in a fixed number of queries): no query here.
"""
from __future__ import annotations

from typing import Any

from rewards.evaluation.baselines import NAMES as BASELINE_NAMES
from rewards.evaluation.baselines import baseline_verdicts, best_of_n_baseline_verdict
from rewards.evaluation.intervals import no_flag_advice, threshold_verdict, verdict
from rewards.evaluation.step_metrics import DEFAULT_THRESHOLD
from rewards.training.metrics import Calibration, DataCounts, TrainingMetrics, Validation

from .contracts import EvaluationResults, training_metrics
from .models import EvaluationRun, Kind, RewardModel, ScoringJob

METHOD_LABELS = {"prm": "PRM", "orm": "ORM", "majority": "Majority vote", "pass": "pass@N"}
#: the best-of-N cells of the baselines, beside the methods (``rewards.evaluation.baselines``)
BASELINE_LABELS = {"length": "Solution length", "position": "Step position", "random": "Random"}
#: below these a verdict says nothing a reader should act on: the page greys the figures and says why instead
MIN_CLASS_STEPS = 50
MIN_CLASS_SOLUTIONS = 50
MIN_PROBLEMS = 10


def percent(value: float | None) -> float | None:
    """The dashboard shows every figure in percent, one decimal (fractions stay in the JSON/CSV downloads)."""
    return None if value is None else round(100 * float(value), 1)


def model_metrics(model: RewardModel) -> TrainingMetrics | None:
    """The metrics its training wrote, typed (None for a model registered without any)."""
    return training_metrics(model.metrics, model.kind)


def _train_counts(model: RewardModel) -> DataCounts | None:
    metrics = model_metrics(model)
    return metrics.data.train if metrics is not None and metrics.data is not None else None


def validation_of(model: RewardModel) -> Validation:
    metrics = model_metrics(model)
    return metrics.validation if metrics is not None and metrics.validation is not None else Validation()


def trained_on_words(model: RewardModel) -> str:
    """What a model's training set counts, in words: a PRM learns from labeled steps (in labeled paths: a
    solution's chosen path or an alternative after its prefix), an ORM from solutions with a graded answer."""
    train = _train_counts(model)
    if model.kind == Kind.PRM and train is not None and train.steps is not None:
        return f"{train.steps:,} labeled steps in {model.trained_on:,} labeled paths"
    return f"{model.trained_on:,} {'labeled paths' if model.kind == Kind.PRM else 'solutions'}"


def heldout_words(step_metrics: dict[str, Any]) -> str:
    """How many held-out solutions a PRM was scored on, and (where they name them) of how many problems: the
    unit its step-level intervals draw."""
    solutions, problems = step_metrics.get("solutions"), step_metrics.get("problems")
    if solutions is None:
        return ""
    return f"{solutions:,} of {problems:,} problems" if problems is not None else f"{solutions:,}"


def best_of_n_rows(run: EvaluationRun) -> list[dict[str, Any]]:
    """One row per N: mean, std and bootstrap interval per method, and the closed form where it exists."""
    results = EvaluationResults.of(run)
    intervals = results.method_intervals
    picks = {**results.baselines, **results.methods}
    rows = []
    for n in results.ns:
        row: dict[str, Any] = {"n": n}
        for method in (*METHOD_LABELS, *BASELINE_LABELS):
            figures = (picks.get(method) or {}).get(str(n))
            bounds = (intervals.get(method) or {}).get(str(n)) or {}
            row[f"{method}_mean"] = figures["mean"] if figures else None
            row[f"{method}_std"] = figures["std"] if figures else None
            row[f"{method}_low"], row[f"{method}_high"] = bounds.get("low"), bounds.get("high")
            # the page's table reads in percent, one decimal
            row[f"{method}_pct"] = percent(figures["mean"]) if figures else None
            row[f"{method}_std_pct"] = percent(figures["std"]) if figures else None
            row[f"{method}_low_pct"] = percent(bounds.get("low"))
            row[f"{method}_high_pct"] = percent(bounds.get("high"))
            row[f"{method}_ci"] = (f"{row[f'{method}_low_pct']}–{row[f'{method}_high_pct']}"
                                   if bounds.get("low") is not None else "")
            if method != "majority":
                row[f"{method}_exact"] = (results.exact.get(method) or {}).get(str(n))
        rows.append(row)
    return rows


def domain_rows(run: EvaluationRun) -> list[dict[str, Any]]:
    """One row per domain at the evaluation's largest N: each method's percent with its interval, and the paired
    PRM − ORM / PRM − majority differences in points with theirs and the domain's verdict."""
    results = EvaluationResults.of(run)
    n = results.largest_n
    if n is None:
        return []
    rows = []
    for domain, figures in sorted(results.domains.items()):  # jsonb keeps no key order
        intervals = figures.get("intervals") or {}
        bounds = intervals.get("methods") or {}
        paired = intervals.get("paired") or {}
        row: dict[str, Any] = {"domain": domain, "problems": figures["problems"], "n": int(n), "cells": [],
                               "verdict": verdict(paired), "baseline_verdict": best_of_n_baseline_verdict(
                                   figures.get("baselines") or {}, paired, n)}
        picks = {**(figures.get("baselines") or {}), **figures["methods"]}
        for method in (*METHOD_LABELS, *BASELINE_LABELS):
            mean = ((picks.get(method) or {}).get(n) or {}).get("mean")
            low_high = (bounds.get(method) or {}).get(n) or {}
            row[method] = mean
            row["cells"].append({"method": method, "value": percent(mean), "low": percent(low_high.get("low")),
                                 "high": percent(low_high.get("high"))})
        for pair in ("prm-orm", "prm-majority"):
            at_n = (paired.get(pair) or {}).get(n) or {}
            row[pair] = at_n.get("diff")
            row["cells"].append({"method": pair, "value": percent(at_n.get("diff")),
                                 "low": percent(at_n.get("low")), "high": percent(at_n.get("high"))})
        rows.append(row)
    return rows


def _threshold_verdict(intervals: dict[str, Any], model: RewardModel) -> str | None:
    """The paired sentence on the stored threshold against 0.5, saying so when the threshold was not chosen on the
    training problems (a fine-tuned model's comes from its validation split, which may hold the scored solutions)."""
    sentence = threshold_verdict(intervals) if intervals else None
    calibration = validation_of(model).calibration
    if sentence is None or intervals.get("threshold_source") != "model" or (calibration and calibration.folds):
        return sentence
    return (f"{sentence}; this PRM's threshold was chosen on its validation split, which may hold these solutions: "
            "the column of a threshold chosen on other held-out problems is the fair comparison")


def threshold_in_force(model: RewardModel) -> str:
    """Which first-error threshold the PRM's figures use, and why, in one sentence: the one chosen on its training
    problems' folds where it beat 0.5 there, else 0.5."""
    validation = validation_of(model)
    calibration = validation.calibration or Calibration()
    threshold = validation.threshold
    if threshold is None:  # a fine-tuned PRM says why in its own words (``threshold_choice``)
        return validation.threshold_choice or ("0.5: this PRM stores no threshold of its own (its training "
                                               "split had no erroneous or no correct solution)")
    if not calibration.folds:
        return (f"{100 * threshold:.1f} %, chosen on its validation split (a fine-tuned model's; refits over training "
                "folds would cost hours): the cross-fitted column is the fair comparison")
    at_threshold, at_half = calibration.f1_calibrated, calibration.f1_at_default
    figures = (f" (first-error F1 there {100 * at_threshold:.1f} % against {100 * at_half:.1f} % at 0.5)"
               if at_threshold is not None and at_half is not None else "")
    if at_threshold is not None and at_half is not None and at_threshold <= at_half:
        return f"0.5: the threshold chosen on the training folds did not beat 0.5 there{figures}"
    problems = calibration.problems if calibration.problems is not None else "its"
    return (f"{100 * threshold:.1f} %, chosen on {problems} training problems "
            f"cross-fitted over {calibration.folds} folds, where it beat 0.5{figures}")


def step_metric_rows(scorings: list[ScoringJob]) -> list[dict[str, Any]]:
    rows, seen = [], set()
    for job in scorings:
        if job.reward_model_id in seen:
            continue
        seen.add(job.reward_model_id)
        metrics, model = job.step_metrics, job.reward_model
        bench = metrics.get("processbench", {})
        calibrated = metrics.get("processbench_calibrated") or {}
        intervals = metrics.get("intervals") or {}
        validation = validation_of(model).step_level
        row = {"model": model.name, "model_id": model.pk,
               "dataset_version": str(model.dataset_version) if model.dataset_version else None,
               "trained_on": model.trained_on, "trained_on_words": trained_on_words(model),
               "heldout_solutions": metrics.get("solutions"), "heldout_problems": metrics.get("problems"),
               "heldout_words": heldout_words(metrics),
               "heldout_steps": metrics.get("steps"), "step_auroc": metrics.get("step_auroc"),
               "first_error_acc": bench.get("error_acc"), "no_error_acc": bench.get("correct_acc"),
               "processbench_f1": bench.get("f1"),
               "validation_step_auroc": validation.auroc if validation is not None else None,
               "threshold": metrics.get("threshold", DEFAULT_THRESHOLD),
               "threshold_calibrated": bool(metrics.get("calibrated")),
               "first_error_f1_calibrated": calibrated.get("f1", bench.get("f1")),
               "first_error_f1_crossfit": (intervals.get("first_error_f1_crossfit") or {}).get("value"),
               "advice": no_flag_advice(intervals) if intervals else None,
               "threshold_verdict": _threshold_verdict(intervals, model)}
        # the table's percent cells, in its column order, each with its interval (over held-out problems)
        cells = []
        for metric, value in (("step_auroc", row["step_auroc"]), ("first_error_acc", row["first_error_acc"]),
                              ("no_error_acc", row["no_error_acc"]), ("first_error_f1", row["processbench_f1"]),
                              ("first_error_f1_calibrated", row["first_error_f1_calibrated"]),
                              ("first_error_f1_crossfit", row["first_error_f1_crossfit"]),
                              ("threshold", row["threshold"])):
            bounds = intervals.get("threshold_interval" if metric == "threshold" else metric) or {}
            cells.append({"metric": metric, "value": percent(value), "low": percent(bounds.get("low")),
                          "high": percent(bounds.get("high"))})
        baselines = metrics.get("baselines") or {}
        flawed = (baselines.get("model") or {}).get("flawed_auroc") or {}
        cells.append({"metric": "flawed_auroc", "value": percent(flawed.get("value")),
                      "low": percent(flawed.get("low")), "high": percent(flawed.get("high"))})
        row["cells"] = cells
        row["baselines"] = [_baseline_row(name, figures) for name, figures in baselines.get("baselines", {}).items()]
        row["baseline_verdicts"] = baseline_verdicts(baselines) if baselines else []
        row["strongest"] = baselines.get("strongest") or {}
        row["sibling_pairs"] = metrics.get("sibling_pairs") or {}
        row["step_auroc_distinct"] = metrics.get("step_auroc_distinct")
        row["threshold_in_force"] = threshold_in_force(model)
        row["distinct_steps"] = metrics.get("distinct_steps")
        rows.append(row)
    return rows


def _baseline_row(name: str, figures: dict[str, Any]) -> dict[str, Any]:
    """A baseline's row under its PRM in the step-level table: the same columns, blank where it has no figure."""
    cells = []
    for metric in ("step_auroc", "first_error_acc", "no_error_acc", "first_error_f1", "first_error_f1_calibrated",
                   "first_error_f1_crossfit", "threshold", "flawed_auroc"):
        bounds = figures.get(metric) or {}
        cells.append({"metric": metric, "value": percent(bounds.get("value")), "low": percent(bounds.get("low")),
                      "high": percent(bounds.get("high"))})
    return {"name": name, "label": BASELINE_NAMES.get(name, name), "cells": cells}


def withheld_reasons(run: EvaluationRun | None, step_rows: list[dict[str, Any]]) -> list[str]:
    """Why the verdicts are withheld, one sentence each; empty when the data can carry them: a PRM with fewer than
    50 labeled steps of a class, an ORM with fewer than 50 solutions of a class, or fewer than 10 distinct
    problems under either figure."""
    reasons = []
    jobs = [run.prm_scoring, run.orm_scoring] if run is not None else []
    for job in jobs:
        if job is None:
            continue
        model = job.reward_model
        train = _train_counts(model) or DataCounts()
        keys = (("positive_steps", "labeled steps rated correct or neutral"), ("negative_steps",
                "labeled steps rated wrong")) if model.kind == Kind.PRM else (
                ("positive", "solutions with a right answer"), ("negative", "solutions with a wrong answer"))
        floor = MIN_CLASS_STEPS if model.kind == Kind.PRM else MIN_CLASS_SOLUTIONS
        for key, words in keys:
            count = getattr(train, key)
            if count is not None and count < floor:
                reasons.append(f"the {model.kind.upper()} “{model.name}” learned from {count} {words} "
                               f"(fewer than {floor})")
    problems = EvaluationResults.of(run).problems if run is not None else None
    if problems is not None and problems < MIN_PROBLEMS:
        reasons.append(f"best-of-N rests on {problems} problems (fewer than {MIN_PROBLEMS})")
    for row in step_rows[:1]:  # the newest PRM's held-out figures, the ones the verdicts read
        held = row.get("heldout_problems")
        if held is not None and held < MIN_PROBLEMS:
            reasons.append(f"the step-level figures of “{row['model']}” rest on {held} held-out problems "
                           f"(fewer than {MIN_PROBLEMS})")
    return reasons


def history_rows(runs: list[EvaluationRun]) -> list[dict[str, Any]]:
    """Best-of-N at the largest N per dataset version (newest run per version): is the newest PRM better?"""
    by_version: dict[int, dict[str, Any]] = {}
    for run in runs:  # newest first
        for kind, job in ((Kind.PRM, run.prm_scoring), (Kind.ORM, run.orm_scoring)):
            if job is None or job.reward_model.dataset_version is None:
                continue
            version = job.reward_model.dataset_version
            row = by_version.setdefault(version.pk, {"dataset_version": str(version), "number": version.number,
                                              "prm": None, "orm": None, "pool": run.pool.name})
            results = EvaluationResults.of(run)
            n = results.largest_n
            if row[kind] is None and n is not None:
                exact = results.exact.get(kind) or {}
                mean = ((results.methods.get(kind) or {}).get(n) or {}).get("mean")
                row[kind] = exact.get(n, mean)
    return sorted(by_version.values(), key=lambda r: (r["dataset_version"], r["number"]))
