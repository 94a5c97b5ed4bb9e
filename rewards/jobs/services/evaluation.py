"""Evaluation runs: best-of-N for PRM, ORM, majority and pass@N on a pool, computed by rewards.evaluation.

The pool and the stored scores are turned into the estimator's ``Pool`` objects (answers normalised with
``stepcore.grading.normalize_answer`` so that majority voting groups ``\\frac12`` with ``\\frac{1}{2}``
only when the text matches after normalisation, as the grader's exact-match step does). The same rows
can be written in the paper's ``scored-test-samples.jsonl`` layout, so the CLI reproduces any run.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np

from annotate.models import Campaign
from annotate.permissions import Actor, account_of, can_run_models, require
from rewards.evaluation import Pool, best_of_n, encode_pools, exact_best_of_n
from rewards.evaluation.baselines import BEST_OF_N_BASELINES, Choice, candidate_scores
from stepcore.grading import normalize_answer

from ..models import Candidate, CandidatePool, EvaluationRun, JobStatus, Kind, PoolProblem, ScoringJob
from .training import MODELS_ONLY, JobInputError

AGGREGATIONS = ("product", "min")


def _scores(job: ScoringJob | None, aggregation: str) -> dict[int, float]:
    if job is None:
        return {}
    field = "score_min" if aggregation == "min" and job.reward_model.kind == Kind.PRM else "score"
    return dict(job.scores.values_list("candidate_id", field))


def scored_sample_rows(pool: CandidatePool, prm: ScoringJob | None, orm: ScoringJob | None,
                       aggregation: str = "product") -> Iterator[dict[str, Any]]:
    """One ``scored-test-samples.jsonl`` object per candidate (scores null where the model gave none)."""
    prm_scores, orm_scores = _scores(prm, aggregation), _scores(orm, aggregation)
    rows = (Candidate.objects.filter(pool_problem__pool=pool)
            .values_list("id", "answer", "is_correct", "pool_problem__problem__text")
            .order_by("pool_problem__index", "index"))
    for candidate_id, answer, correct, problem in rows.iterator(chunk_size=5000):
        yield {"problem": problem, "answer": normalize_answer(answer) if answer else None, "is_correct": correct,
               "prm_score": prm_scores.get(candidate_id), "orm_score": orm_scores.get(candidate_id)}


def pools_for(pool: CandidatePool, prm: ScoringJob | None, orm: ScoringJob | None,
              aggregation: str = "product") -> list[Pool]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in scored_sample_rows(pool, prm, orm, aggregation):
        grouped[row["problem"]].append(row)
    return [Pool.from_arrays([r["answer"] for r in rows], [r["is_correct"] for r in rows],
                             [r["prm_score"] for r in rows], [r["orm_score"] for r in rows], problem=problem)
            for problem, rows in grouped.items()]


def _check_scoring(job: ScoringJob | None, kind: str, pool: CandidatePool) -> None:
    if job is None:
        return
    field = f"{kind}_scoring"
    if job.status != JobStatus.SUCCEEDED:
        raise JobInputError(field, f"scoring job {job.pk} is {job.status}, not succeeded")
    if job.reward_model.kind != kind:
        raise JobInputError(field, f"scoring job {job.pk} used a {job.reward_model.kind}, not a {kind}")
    if job.pool_id != pool.pk:
        raise JobInputError(field, f"scoring job {job.pk} scored pool {job.pool}, not {pool}")


def in_campaign(campaign: Campaign, pool: CandidatePool, *jobs: ScoringJob | None) -> bool:
    """An evaluation of a campaign reads only that campaign's things: its pool, and scorings of that pool by
    the campaign's own reward models (another campaign's scoring of a pool it was pointed at stays its own)."""
    return pool.campaign_id == campaign.pk and all(
        job.pool_id == pool.pk and job.reward_model.campaign_id == campaign.pk for job in jobs if job is not None)


def data_efficiency(campaign: Campaign | None, pool: CandidatePool) -> dict[str, list[dict[str, Any]]]:
    """Best-of-N (closed form, N = pool size) per model against its training-set size, for every model of
    the campaign that scored this pool: several jobs on nested subsets (``limit``) give the curve."""
    points: dict[str, list[dict[str, Any]]] = {Kind.PRM: [], Kind.ORM: []}
    jobs = (ScoringJob.objects.filter(pool=pool, status=JobStatus.SUCCEEDED, reward_model__campaign=campaign)
            .select_related("reward_model").order_by("reward_model__trained_on", "-id"))
    seen: set[int] = set()
    for job in jobs:
        model = job.reward_model
        if model.pk in seen:
            continue
        seen.add(model.pk)
        prm, orm = (job, None) if model.kind == Kind.PRM else (None, job)
        enc = encode_pools(pools_for(pool, prm, orm), pool.pool_size or None)
        exact = exact_best_of_n(enc, [enc.pool_size])
        by_n = exact.get(model.kind)
        value = by_n[str(enc.pool_size)] if by_n else None
        points[model.kind].append({"model": model.name, "model_id": model.pk, "trained_on": model.trained_on,
                                   "n": enc.pool_size, "accuracy": value,
                                   "dataset_version": str(model.dataset_version) if model.dataset_version else None})
    return points


def baseline_choices(prm_scoring: ScoringJob | None) -> dict[str, Choice]:
    """The best-of-N baselines' choices, made on the PRM's training solutions when its scoring fitted them (the
    held-out step-level figures do), else the rules as stated: longer and longer-winded solutions are suspect."""
    fitted = ((prm_scoring.step_metrics if prm_scoring else {}) or {}).get("baselines", {}).get("choices") or {}
    return {name: Choice.from_dict(fitted[name]) if name in fitted else
            Choice(name=name, sign=1.0, solution_sign=1.0, cut=0.0, scale=1.0) for name in BEST_OF_N_BASELINES}


def baseline_scores(pool: CandidatePool, pools: list[Pool], choices: dict[str, Choice]) -> dict[str, list[np.ndarray]]:
    """Each baseline's score for every candidate, laid out as ``pools_for`` lays them (problem by problem)."""
    steps: dict[str, list[list[str]]] = defaultdict(list)
    rows = (Candidate.objects.filter(pool_problem__pool=pool).values_list("pool_problem__problem__text", "steps")
            .order_by("pool_problem__index", "index"))
    for problem, candidate_steps in rows.iterator(chunk_size=5000):
        steps[problem].append(list(candidate_steps or []))
    return {name: [candidate_scores(choice, steps[p.problem or ""]) for p in pools] for name, choice in choices.items()}


def domain_results(pool: CandidatePool, pools: list[Pool], ns: list[int], trials: int,
                   seed: int, baselines: dict[str, list[np.ndarray]] | None = None) -> dict[str, dict[str, Any]]:
    """Best-of-N per domain (the problems' subject: MMLU-Pro's category) with each domain's intervals and paired
    PRM − ORM / PRM − majority differences: whether process supervision helps may differ between law and
    economics. Empty when the pool's problems are of fewer than two domains (the overall table says it all)."""
    subjects = dict(PoolProblem.objects.filter(pool=pool).values_list("problem__text", "problem__subject"))
    grouped: dict[str, list[int]] = defaultdict(list)
    for number, problem_pool in enumerate(pools):
        grouped[subjects.get(problem_pool.problem or "") or ""].append(number)
    if len(grouped) < 2:
        return {}
    domains = {}
    for domain, members in sorted(grouped.items()):
        doc = best_of_n([pools[i] for i in members], ns=ns, trials=trials, seed=seed,
                        pool_size=pool.pool_size or None, include_exact=False,
                        baselines={name: [scores[i] for i in members] for name, scores in (baselines or {}).items()})
        domains[domain or "(none)"] = {"problems": doc["problems"], "methods": doc["methods"],
                                       "baselines": doc.get("baselines") or {},
                                       "intervals": doc.get("intervals") or {}}
    return domains


def evaluate_pool(pool: CandidatePool, *, prm_scoring: ScoringJob | None = None,
                  orm_scoring: ScoringJob | None = None, aggregation: str = "product", trials: int = 400,
                  seed: int = 0, ns: list[int] | None = None, campaign: Campaign | None = None,
                  user: Any = None) -> EvaluationRun:
    if aggregation not in AGGREGATIONS:
        raise JobInputError("aggregation", f"must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
    if not 1 <= trials <= 100_000:
        raise JobInputError("trials", f"must be between 1 and 100000, got {trials}")
    if prm_scoring is None and orm_scoring is None:
        raise JobInputError("prm_scoring", "give a PRM or an ORM scoring job (or both)")
    _check_scoring(prm_scoring, Kind.PRM, pool)
    _check_scoring(orm_scoring, Kind.ORM, pool)
    if campaign is not None and not in_campaign(campaign, pool, prm_scoring, orm_scoring):
        raise JobInputError("pool", f"the pool and its scorings must all be of campaign {campaign.slug}")
    campaign = campaign or pool.campaign or next(
        (j.reward_model.campaign for j in (prm_scoring, orm_scoring) if j and j.reward_model.campaign), None)
    pools = pools_for(pool, prm_scoring, orm_scoring, aggregation)
    choices = baseline_choices(prm_scoring)
    baselines = baseline_scores(pool, pools, choices)
    try:
        results = best_of_n(pools, ns=ns, trials=trials, seed=seed, pool_size=pool.pool_size or None,
                            baselines=baselines)
    except ValueError as exc:
        raise JobInputError("ns", str(exc)) from None
    results["baseline_choices"] = {name: choice.to_dict() for name, choice in choices.items()}
    results["unscored"] = {kind: int(sum(np.isnan(getattr(p, f"{kind}_score")).sum() for p in pools))
                           for kind in ("prm", "orm")}
    results["domains"] = domain_results(pool, pools, results["ns"], trials, seed, baselines)
    return EvaluationRun.objects.create(
        campaign=campaign, pool=pool, prm_scoring=prm_scoring, orm_scoring=orm_scoring, aggregation=aggregation,
        trials=trials, seed=seed, results=results, created_by=account_of(user),
        step_metrics=prm_scoring.step_metrics if prm_scoring else {},
        data_efficiency=data_efficiency(campaign, pool))


def evaluate_scorings(campaign: Campaign, *, prm_scoring: int | None, orm_scoring: int | None,
                      aggregation: str = "product", trials: int = 400, user: Actor) -> EvaluationRun:
    """Evaluate the pool of a PRM and/or an ORM scoring of this campaign's pools, given by id (page and API)."""
    require(can_run_models, user, campaign, MODELS_ONLY)
    jobs: dict[str, ScoringJob] = {}
    for kind, pk in (("prm", prm_scoring), ("orm", orm_scoring)):
        if pk is None:
            continue
        job = ScoringJob.objects.select_related("reward_model", "pool").filter(pk=pk).first()
        if job is None or not in_campaign(campaign, job.pool, job):  # another campaign's job: as if there were none
            raise JobInputError(f"{kind}_scoring", f"no scoring job {pk} in campaign {campaign.slug}")
        jobs[kind] = job
    if not jobs:
        raise JobInputError("prm_scoring", "choose a PRM or an ORM scoring (or both)")
    if len({job.pool_id for job in jobs.values()}) > 1:
        raise JobInputError("orm_scoring", "the PRM and the ORM scorings are of different pools")
    pool = next(iter(jobs.values())).pool
    return evaluate_pool(pool, prm_scoring=jobs.get("prm"), orm_scoring=jobs.get("orm"), aggregation=aggregation,
                         trials=trials, campaign=campaign, user=user)
