"""Scoring jobs: a registered model scores every candidate of a pool through the same launch backends.

The job runs ``python -m rewards.training score`` (same sequence layout as training) on an input file
written from the pool; a PRM also scores the held-out (``split == "test"``) labeled solutions of the
dataset it was trained on, which gives its step AUROC and ProcessBench first-error figures.
"""
from __future__ import annotations

import json
import math
import random
import uuid
from pathlib import Path
from typing import Any

from django.db import transaction

from annotate.permissions import Actor, account_of, can_run_models, require
from rewards.evaluation import lowest_step_on_last_rate, processbench_metrics, step_auroc
from rewards.evaluation.baselines import BASELINES, Choice, fit, paired_step_figures
from rewards.evaluation.intervals import step_level_intervals
from rewards.evaluation.step_metrics import DEFAULT_THRESHOLD, distinct_steps, sibling_pair_accuracy
from rewards.training.data import TrainingDataError, iter_records
from steplab import jobs

from ..backends import Launch, count_lines, python_command
from ..models import BackendKind, Candidate, CandidatePool, CandidateScore, Kind, RewardModel, ScoringJob
from . import runner
from .training import MODELS_ONLY, JobInputError, jobs_root

INPUT = "input.jsonl"
SCORED = "scored.jsonl"
HELDOUT = "heldout.jsonl"
HELDOUT_SCORED = "heldout_scored.jsonl"
#: held-out solutions a PRM scores for the step-level figures: scoring reads every token of every step, and the
#: demo's 3,433 held-out solutions alone take about 9 minutes on 2 CPU cores (300 of them: 68 s); 200 solutions
#: (~3,000 rated steps) keep a comparison inside its 15-minute budget and the step AUROC's sampling error near ±0.03
HELDOUT_SAMPLE = 200


def start_scoring_job(reward_model: RewardModel, *, pool: CandidatePool, backend: str = BackendKind.LOCAL,
                      user: Actor) -> ScoringJob:
    require(can_run_models, user, reward_model.campaign, MODELS_ONLY)
    if backend not in BackendKind.values:
        raise JobInputError("backend", f"must be one of {', '.join(BackendKind.values)}, got {backend!r}")
    if pool.candidate_count == 0:
        raise JobInputError("pool", f"pool {pool} has no candidates")
    job = ScoringJob.objects.create(reward_model=reward_model, pool=pool, backend=backend, started_by=account_of(user))
    job.work_dir = str(jobs_root() / f"score-{job.pk}-{uuid.uuid4().hex[:8]}")
    job.save(update_fields=["work_dir"])
    jobs.dispatch_on_commit(job)
    return job


@transaction.atomic
def start_scoring_jobs(reward_models: list[RewardModel], *, pool: CandidatePool,
                       backend: str = BackendKind.LOCAL, user: Actor) -> list[ScoringJob]:
    """One scoring job of ``pool`` per model, all or none."""
    return [start_scoring_job(model, pool=pool, backend=backend, user=user) for model in reward_models]


def _write_input(job: ScoringJob) -> int:
    """The pool as the scorer's input rows; a PRM skips candidates without steps (they stay unscored), and a
    labeling round's scoring skips candidates already turned into labeling work."""
    work = Path(job.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    kind = job.reward_model.kind
    rows = 0
    candidates = Candidate.objects.filter(pool_problem__pool=job.pool)
    if hasattr(job, "labeling_round"):  # a labeling round's scoring: only what could still be selected
        candidates = candidates.filter(solution__isnull=True)
    listed = candidates.values_list("id", "steps", "pool_problem__problem__text").order_by(
        "pool_problem__index", "index")
    with (work / INPUT).open("w", encoding="utf-8") as handle:
        for candidate_id, steps, prompt in listed.iterator(chunk_size=2000):
            if kind == Kind.PRM and not steps:
                continue
            row: dict[str, Any] = {"id": candidate_id, "prompt": prompt}
            if kind == Kind.PRM:
                row["completions"] = steps
            else:
                row["completion"] = "\n".join(steps)
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            rows += 1
    return rows


def _write_heldout(job: ScoringJob) -> int:
    """Held-out labeled solutions (test split, with ratings) of the PRM's training file: all of them, or a seeded
    sample of HELDOUT_SAMPLE when there are more (the step-level figures' count says how many were scored)."""
    dataset = Path(job.reward_model.job.dataset_path)
    records: list[dict[str, Any]] = []
    try:
        for _, record in iter_records(dataset):
            if record.get("split") == "test" and record.get("completions") and record.get("ratings"):
                # the problem: the step-level intervals draw a problem's solutions together
                records.append({"prompt": record["prompt"], "completions": record["completions"],
                                "ratings": record["ratings"], "problem": record.get("problem_id") or record["prompt"]})
    except (FileNotFoundError, TrainingDataError):
        return 0
    # a head model scores every held-out step cheaply (its columns come from the texts, or from the vectors its
    # training cached): all of them
    head = job.reward_model.metrics.get("method") == "head"
    if len(records) > HELDOUT_SAMPLE and not head:
        kept = sorted(random.Random(0).sample(range(len(records)), HELDOUT_SAMPLE))
        records = [records[index] for index in kept]
    with (Path(job.work_dir) / HELDOUT).open("w", encoding="utf-8") as handle:
        for number, record in enumerate(records):
            handle.write(json.dumps({"id": number, **record}, ensure_ascii=False) + "\n")
    return len(records)


def scoring_launch(job: ScoringJob, *, heldout: bool) -> Launch:
    work = Path(job.work_dir)
    location = job.reward_model.location
    commands = [python_command("rewards.training", "score", "--model", location, "--input", str(work / INPUT),
                               "--out", str(work / SCORED))]
    if heldout:
        commands.append(python_command("rewards.training", "score", "--model", location,
                                       "--input", str(work / HELDOUT), "--out", str(work / HELDOUT_SCORED)))
    return Launch(name=f"steplab-score-{job.pk}", work_dir=work, commands=commands,
                  gpus=1 if job.backend != BackendKind.LOCAL else 0)


def held_out_step_metrics(path: Path, neutral: str, threshold: float | None = None, *,
                          training: Path | None = None) -> dict[str, Any]:
    """Step AUROC against the human ratings and ProcessBench first-error figures, at 0.5 and at the PRM's
    calibrated ``threshold`` (None: the model has none, 0.5 is used), each with a bootstrap interval
    (``intervals``): over the held-out problems where every row names its ``problem``, else over the solutions."""
    scores: list[float] = []
    ratings: list[int] = []
    per_solution: list[list[float]] = []
    per_ratings: list[list[int]] = []
    first_errors: list[int] = []
    problems: list[str | None] = []
    prompts: list[str] = []
    texts: list[list[str]] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            steps, rated = row["step_scores"], row["ratings"]
            scores += steps
            ratings += rated
            per_solution.append(steps)
            per_ratings.append(rated)
            first_errors.append(next((i for i, r in enumerate(rated) if r == -1), -1))
            problems.append(row.get("problem"))
            prompts.append(str(row.get("prompt", "")))
            texts.append([str(step) for step in row.get("completions") or [""] * len(steps)])
    groups = [str(p) for p in problems] if problems and None not in problems else None
    figures: dict[str, Any] = {"solutions": len(per_solution), "steps": len(scores), "neutral": neutral,
                               "threshold": DEFAULT_THRESHOLD if threshold is None else threshold,
                               "calibrated": threshold is not None}
    try:
        figures["step_auroc"] = step_auroc(scores, ratings, neutral=neutral)
    except ValueError as exc:
        figures["step_auroc"] = None
        figures["step_auroc_note"] = str(exc)
    for key, point in (("processbench", DEFAULT_THRESHOLD), ("processbench_calibrated", figures["threshold"])):
        bench = processbench_metrics(first_errors, step_scores=per_solution, threshold=point)
        figures[key] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in bench.items()}
    figures["intervals"] = step_level_intervals(per_solution, per_ratings, groups=groups, neutral=neutral,
                                                threshold=figures["threshold"])
    figures["problems"] = figures["intervals"]["problems"]  # None where the rows name no problem
    figures["lowest_step_on_last"] = lowest_step_on_last_rate(per_solution) if per_solution else None
    # beside the AUROC over every scored row: each distinct (problem, prefix, step) once, and the in-context pairs
    unique_scores, unique_ratings = distinct_steps(prompts, texts, per_solution, per_ratings)
    try:
        figures["step_auroc_distinct"] = step_auroc(unique_scores, unique_ratings, neutral=neutral)
    except ValueError:
        figures["step_auroc_distinct"] = None
    figures["distinct_steps"] = len(unique_scores)
    figures["sibling_pairs"] = sibling_pair_accuracy(prompts, texts, per_solution, per_ratings, neutral)
    if training is not None and per_solution:
        choices = fit_baselines(training, neutral)
        if choices:
            figures["baselines"] = paired_step_figures(per_solution, per_ratings, texts, choices, groups=groups,
                                                       threshold=figures["threshold"], neutral=neutral)
    return figures


#: training solutions the baselines' choices are made on: a seeded sample beyond (each choice searches every cut)
BASELINE_TRAINING = 5000


def fit_baselines(dataset: Path, neutral: str) -> dict[str, Choice]:
    """The baselines' free choices made on the training split of the PRM's own dataset (never on held-out rows)."""
    solutions: list[list[str]] = []
    ratings: list[list[int]] = []
    try:
        for _, record in iter_records(dataset):
            if record.get("split") != "test" and record.get("completions") and record.get("ratings"):
                solutions.append([str(step) for step in record["completions"]])
                ratings.append([int(r) for r in record["ratings"]])
    except (FileNotFoundError, TrainingDataError):
        return {}
    if len(solutions) > BASELINE_TRAINING:
        kept = sorted(random.Random(0).sample(range(len(solutions)), BASELINE_TRAINING))
        solutions, ratings = [solutions[i] for i in kept], [ratings[i] for i in kept]
    if not solutions:
        return {}
    return {name: fit(name, solutions, ratings, neutral=neutral) for name in BASELINES}


def store_scores(job: ScoringJob) -> int:
    work = Path(job.work_dir)
    objects = []
    with (work / SCORED).open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            objects.append(CandidateScore(scoring_job=job, candidate_id=int(row["id"]), score=float(row["score"]),
                                          score_min=row.get("score_min"), step_scores=row.get("step_scores")))
    CandidateScore.objects.bulk_create(objects, batch_size=2000)
    if (work / HELDOUT_SCORED).is_file():
        neutral = job.reward_model.job.config.get("neutral", "positive")
        threshold = (job.reward_model.metrics.get("validation") or {}).get("threshold")
        job.step_metrics = held_out_step_metrics(work / HELDOUT_SCORED, neutral, threshold,
                                                 training=Path(job.reward_model.job.dataset_path))
        ScoringJob.objects.filter(pk=job.pk).update(step_metrics=job.step_metrics)
    return len(objects)


def scoring_hooks(job: ScoringJob, *, heldout: bool | None = None) -> runner.JobHooks:
    work = Path(job.work_dir)
    if heldout is None:
        heldout = (work / HELDOUT).is_file() and (work / HELDOUT).stat().st_size > 0
    expected = max(job.pool.candidate_count, 1)
    return runner.JobHooks(launch=scoring_launch(job, heldout=heldout),
                           progress=lambda: {"progress": min(count_lines(work / SCORED) / expected, 0.99)},
                           on_success=lambda: store_scores(job))


def run_scoring_job(job_id: int) -> str | None:
    job = runner.claim(ScoringJob, job_id, related=("reward_model__job", "pool"))
    if job is None:
        return None
    if _write_input(job) == 0:
        runner.finish(job, "failed", error=f"pool {job.pool} has no candidate this {job.reward_model.kind} can score")
        return job.status
    heldout = job.reward_model.kind == Kind.PRM and _write_heldout(job) > 0
    return runner.watch(job, scoring_hooks(job, heldout=heldout))
