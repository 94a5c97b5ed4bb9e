""""Compare PRM and ORM" in one click: snapshot → train a PRM and an ORM → score the pool with both → evaluate.

Nothing here trains, scores or evaluates: each stage calls the service that does it (``create_dataset_version``,
``start_training_job``, ``start_scoring_job``, ``evaluate_pool``), so a comparison's jobs are ordinary jobs with
their own pages, logs and cancel buttons. ``advance`` moves a run one stage on when the jobs of its stage have
ended; it is called by the Celery task that starts a run, by the tasks that watched its jobs (as soon as a job
ends) and by the periodic reaper (for a watcher that was lost). Every move is a conditional UPDATE on
(status running, the stage it leaves), so concurrent callers move a run once: the loser's transaction, with the
jobs it started, is rolled back.

Failure reasons name the stage and say what to do, in one sentence; the job pages keep the details.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotate.models import Campaign
from annotate.permissions import Actor, NotAllowed, account_of, actor_for, can_run_models, require
from rewards.models import DatasetVersion
from rewards.services.datasets import create_dataset_version
from rewards.training.data import rows_outside
from steplab import jobs

from ..models import (
    ACTIVE_STATUSES,
    Candidate,
    CandidatePool,
    ComparisonRun,
    JobStatus,
    Kind,
    PoolProblem,
    PoolPurpose,
    ScoringJob,
    TrainingJob,
)
from .evaluation import evaluate_pool
from .pools import free_pool_name
from .scoring import start_scoring_job
from .training import (
    EMPTY_DATASET,
    MODELS_ONLY,
    JobInputError,
    TrainingRequest,
    backbones,
    dataset_file,
    request_cancel,
    start_training_job,
)

log = logging.getLogger(__name__)
J = TypeVar("J", TrainingJob, ScoringJob)

#: the budget per model when the form is left as it is. Both models train with method "auto": on a CPU the head
#: (by default over the steps' own columns, no backbone) learns from every label of the version, and this is its
#: optimizer's iterations (L-BFGS settles well before); on a GPU node it is fine-tuning's optimizer steps
DEFAULT_MAX_STEPS = 300
#: how both models train: the head on a CPU, fine-tuning where CUDA is present (``rewards.training.heads``)
METHOD = "auto"
MAX_MAX_STEPS = 100_000
#: candidates scored per problem by default: scoring is most of a CPU run's time (a PRM reads every token of
#: every candidate), and N = 16 already shows where PRM, ORM and majority part
DEFAULT_PER_PROBLEM = 16
#: past any pool's size (the paper's test pools hold 1,860 samples a problem), and a number the column holds
MAX_PER_PROBLEM = 10_000
#: held-out rows each model's own validation predicts: a check on the run, not the comparison's figures (the
#: step-level table comes from scoring the held-out solutions), so a seeded sample keeps a CPU run in its budget
VALIDATION_ROWS = 300
SUBSET_SOURCE = "subset of pool"  # how a comparison's copy of a pool is told apart from the pools users bring
STAGE_WORDS: dict[str, str] = {ComparisonRun.Stage.SNAPSHOT: "snapshot", ComparisonRun.Stage.TRAIN: "training",
                               ComparisonRun.Stage.SCORE: "scoring", ComparisonRun.Stage.EVALUATE: "evaluation"}


class _Lost(Exception):
    """Another caller moved the run first (or it was cancelled): roll back what this call started."""


def comparison_pools(campaign: Campaign) -> list[CandidatePool]:
    """The pools a comparison may score, the default first: the pool marked ``comparison_default``, else the
    largest (most candidates; evaluation pools before labeling pools, then the newest). A subset an earlier
    comparison made is never offered."""
    pools = (CandidatePool.objects.filter(campaign=campaign, candidate_count__gt=0)
             .exclude(source__startswith=SUBSET_SOURCE))
    return sorted(pools, key=lambda p: (not p.comparison_default, p.purpose != PoolPurpose.EVALUATION,
                                        -p.candidate_count, -p.created_at.timestamp(), -p.pk))


def comparison_pool(campaign: Campaign, pool_id: int | None = None) -> CandidatePool | None:
    """The pool a comparison scores: the one chosen (by id, among ``comparison_pools``) or the default."""
    pools = comparison_pools(campaign)
    if pool_id is None:
        return pools[0] if pools else None
    chosen = next((p for p in pools if p.pk == pool_id), None)
    if chosen is None:
        raise JobInputError("pool", f"campaign {campaign.slug} has no candidate pool {pool_id} to compare on")
    return chosen


def first_per_problem(pool: CandidatePool, k: int) -> CandidatePool:
    """The pool itself when no problem has more than ``k`` candidates, else a pool of the first ``k`` candidates
    of each problem (copied once, graded as they were; reused by later comparisons)."""
    if k == 0 or pool.pool_size <= k:
        return pool
    # found by what it was copied from, in the pool's campaign: a name can be chosen by anyone who uploads a pool
    source = f"{SUBSET_SOURCE} {pool.pk}: the first {k} candidates per problem"
    existing = CandidatePool.objects.filter(campaign=pool.campaign, source=source).first()
    if existing is not None:
        return existing
    subset = CandidatePool.objects.create(name=free_pool_name(pool.campaign, f"{pool.name} · first {k} per problem"),
                                          purpose=PoolPurpose.EVALUATION, campaign=pool.campaign, source=source,
                                          split_rule=pool.split_rule, created_by=pool.created_by)
    count = 0
    for problem in pool.problems.order_by("index"):
        copy = PoolProblem.objects.create(pool=subset, problem_id=problem.problem_id, index=problem.index,
                                          source_id=problem.source_id)
        rows = [Candidate(pool_problem=copy, index=c.index, text=c.text, steps=c.steps, answer=c.answer,
                          is_correct=c.is_correct, provenance=c.provenance)
                for c in problem.candidates.order_by("index")[:k]]
        Candidate.objects.bulk_create(rows)
        count += len(rows)
    subset.problem_count, subset.candidate_count, subset.pool_size = pool.problem_count, count, k
    subset.save(update_fields=["problem_count", "candidate_count", "pool_size"])
    return subset


def start_comparison(campaign: Campaign, *, max_steps: int = DEFAULT_MAX_STEPS, base_model: str = "default",
                     per_problem: int = DEFAULT_PER_PROBLEM, pool: int | None = None,
                     user: Actor) -> ComparisonRun:
    """Validate and record a run (queued); its first stage starts on a worker after commit."""
    require(can_run_models, user, campaign, MODELS_ONLY)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 1 <= max_steps <= MAX_MAX_STEPS:
        raise JobInputError("max_steps", f"must be an integer between 1 and {MAX_MAX_STEPS}, got {max_steps!r}")
    if isinstance(per_problem, bool) or not isinstance(per_problem, int) or not 0 <= per_problem <= MAX_PER_PROBLEM:
        raise JobInputError("per_problem", f"must be an integer between 0 (every candidate) and {MAX_PER_PROBLEM}, "
                                           f"got {per_problem!r}")
    if base_model not in backbones():
        raise JobInputError("base_model", f"must be one of {', '.join(backbones())}, got {base_model!r}")
    chosen = comparison_pool(campaign, pool)
    if chosen is None:
        raise JobInputError("pool", f"campaign {campaign.slug} has no candidate pool to pick best-of-N from: "
                                    "upload a pool or sample candidates first")
    active = ComparisonRun.objects.filter(campaign=campaign, status__in=ACTIVE_STATUSES).first()
    if active is not None:
        raise JobInputError("campaign", f"comparison {active.pk} of {campaign.slug} is still {active.status}: "
                                        "cancel it or wait for it to end")
    try:
        with transaction.atomic():
            run = ComparisonRun.objects.create(campaign=campaign, max_steps=max_steps, base_model=base_model,
                                               per_problem=per_problem, source_pool=chosen, pool=chosen,
                                               started_by=account_of(user))
    except IntegrityError:
        raise JobInputError("campaign", f"a comparison of {campaign.slug} is already running") from None
    jobs.dispatch_on_commit(run)  # the broker down: ``reconcile`` sends it once it is back
    return run


def _fail(run: ComparisonRun, message: str) -> bool:
    done = jobs.finish(run, JobStatus.FAILED, error=message)
    if done:
        _stop_jobs(run)
    return done


def _stop_jobs(run: ComparisonRun) -> None:
    for job in (run.prm_job, run.orm_job, run.prm_scoring, run.orm_scoring):
        if job is not None:
            job.refresh_from_db()
            if job.is_active:
                request_cancel(job)


def _move(run: ComparisonRun, leaving: str, **fields: Any) -> None:
    """Leave stage ``leaving`` (only it, only while running and not cancelled) or roll the caller back."""
    moved = ComparisonRun.objects.filter(pk=run.pk, status=JobStatus.RUNNING, stage=leaving,
                                         cancel_requested=False).update(**fields)
    if not moved:
        raise _Lost()


def _job_failure(what: str, job: Any) -> str | None:
    """None while every job of a stage is fine; else the sentence the run fails with."""
    if job.status == JobStatus.SUCCEEDED or job.is_active:
        return None
    reason = job.error_summary or job.status
    return f"{what} (job {job.pk}) {job.status}: {reason}"


def snapshot_labels(campaign: Campaign, *, user: Actor) -> tuple[DatasetVersion, bool]:
    """A new dataset version when the labels changed since the latest one, else the latest: (version, new)."""
    require(can_run_models, user, campaign, MODELS_ONLY)
    version = create_dataset_version(campaign, user=account_of(user))
    if version is not None:
        return version, True
    latest = DatasetVersion.objects.filter(campaign=campaign, status=DatasetVersion.Status.READY).order_by(
        "-number").first()
    assert latest is not None, "create_dataset_version returns None only when the latest version has this content"
    return latest, False


def _snapshot(run: ComparisonRun) -> None:
    campaign = run.campaign
    try:
        version, new = snapshot_labels(campaign, user=actor_for(run.started_by))
    except Exception as exc:  # noqa: BLE001 - any export problem ends the run, with its reason
        log.exception("snapshot of %s failed", campaign)
        _fail(run, f"snapshot: the labels of {campaign.slug} could not be exported ({type(exc).__name__}: {exc})")
        return
    for kind, formats in ((Kind.PRM, ("trl-stepwise", "trl-stepwise-parquet")), (Kind.ORM, ("outcome",))):
        rows = next((version.files[f].get("rows") for f in formats if f in version.files), None)
        if rows == 0:
            _fail(run, "snapshot: " + EMPTY_DATASET[kind].format(version=version))
            return
    if run.source_pool is None:
        _fail(run, "snapshot: the candidate pool of this comparison was deleted")
        return
    # the outcome rows hold the pool's own candidates: the ORM trains on the others, never on the problems it ranks
    # (imported here: importing a format module registers it, and the registry loads them in name order)
    from rewards.formats.outcome import pool_problem_ids

    excluded = pool_problem_ids(run.source_pool)
    if not rows_outside(dataset_file(version, Kind.ORM), excluded):
        _fail(run, f"snapshot: the outcome dataset of {version} has no rows outside the {len(excluded)} problems of "
                   f"the pool {run.source_pool.name}: none of its other solutions has a graded final answer")
        return
    # the same backbone (run.base_model), method and budget for both models: the comparison is fair
    hyper = {"max_steps": run.max_steps, "max_eval_rows": VALIDATION_ROWS, "method": METHOD}
    orm_hyper = {**hyper, "exclude_problems": excluded}
    try:
        with transaction.atomic():
            pool = first_per_problem(run.source_pool, run.per_problem)
            trainings = {kind: start_training_job(TrainingRequest(kind=kind, dataset_version=version,
                                                                  base_model=run.base_model,
                                                                  hyper=orm_hyper if kind == Kind.ORM else hyper),
                                                  user=actor_for(run.started_by)) for kind in (Kind.PRM, Kind.ORM)}
            _move(run, ComparisonRun.Stage.SNAPSHOT, stage=ComparisonRun.Stage.TRAIN, dataset_version=version,
                  new_version=new, pool=pool, prm_job=trainings[Kind.PRM], orm_job=trainings[Kind.ORM])
    except (JobInputError, NotAllowed) as exc:  # NotAllowed: its starter may no longer run models here
        _fail(run, f"training could not start: {exc}")


def _both_succeeded(run: ComparisonRun, stage_jobs: QuerySet[J], ids: tuple[int | None, int | None],
                    doing: str) -> tuple[J, J] | None:
    """The stage's PRM and ORM jobs once both succeeded; None while either is still on its way, or when one
    did not succeed (the run then fails, naming what it was ``doing`` with which model)."""
    prm, orm = (stage_jobs.get(pk=pk) for pk in ids)  # type: ignore[misc]  # set once the stage began
    failure = _job_failure(f"{doing} the PRM", prm) or _job_failure(f"{doing} the ORM", orm)
    if failure:
        _fail(run, failure)
        return None
    if prm.status != JobStatus.SUCCEEDED or orm.status != JobStatus.SUCCEEDED:
        return None
    return prm, orm


def _train(run: ComparisonRun) -> None:
    # Past the snapshot stage both training jobs are set.
    both = _both_succeeded(run, TrainingJob.objects.select_related("reward_model"), (run.prm_job_id, run.orm_job_id),
                           "training")
    if both is None:
        return
    prm, orm = both
    pool = run.pool
    if pool is None:
        _fail(run, "scoring: the candidate pool of this comparison was deleted")
        return
    try:
        with transaction.atomic():
            scorings = {kind: start_scoring_job(job.reward_model, pool=pool, user=actor_for(run.started_by))
                        for kind, job in ((Kind.PRM, prm), (Kind.ORM, orm))}
            _move(run, ComparisonRun.Stage.TRAIN, stage=ComparisonRun.Stage.SCORE, prm_scoring=scorings[Kind.PRM],
                  orm_scoring=scorings[Kind.ORM])
    except (JobInputError, NotAllowed) as exc:
        _fail(run, f"scoring could not start: {exc}")


def _score(run: ComparisonRun) -> None:
    # Past the training stage both scoring jobs are set.
    both = _both_succeeded(run, ScoringJob.objects.select_related("reward_model__job"),
                           (run.prm_scoring_id, run.orm_scoring_id), "scoring the pool with")
    if both is None:
        return
    prm, orm = both
    assert run.pool is not None
    try:
        with transaction.atomic():
            _move(run, ComparisonRun.Stage.SCORE, stage=ComparisonRun.Stage.EVALUATE)
            evaluation = evaluate_pool(run.pool, prm_scoring=prm, orm_scoring=orm, campaign=run.campaign,
                                       user=run.started_by)
            _move(run, ComparisonRun.Stage.EVALUATE, stage=ComparisonRun.Stage.DONE, status=JobStatus.SUCCEEDED,
                  evaluation=evaluation, finished_at=timezone.now())
    except JobInputError as exc:
        _fail(run, f"evaluation: {exc}")


STAGES: dict[str, Callable[[ComparisonRun], None]] = {
    ComparisonRun.Stage.SNAPSHOT: _snapshot, ComparisonRun.Stage.TRAIN: _train, ComparisonRun.Stage.SCORE: _score}


def advance(run_id: int) -> str | None:
    """Move the run on as far as its jobs allow; returns its status (None when there is no such run)."""
    jobs.claim(ComparisonRun, run_id, where={"cancel_requested": False})  # its first call starts it
    run = (ComparisonRun.objects.select_related("campaign", "pool", "source_pool", "started_by", "prm_job", "orm_job",
                                                "prm_scoring", "orm_scoring").filter(pk=run_id).first())
    if run is None:
        return None
    if run.status == JobStatus.RUNNING and run.stage in STAGES:
        try:
            STAGES[run.stage](run)
        except _Lost:
            pass  # another caller moved it (or it was cancelled): nothing of this call was kept
        except Exception as exc:  # noqa: BLE001 - an unexpected error still ends the run with a reason
            log.exception("advancing %s failed", run)
            _fail(run, f"{STAGE_WORDS.get(run.stage, run.stage)}: unexpected error ({type(exc).__name__}: {exc})")
        run.refresh_from_db()
    return run.status


def job_finished(model: type[TrainingJob | ScoringJob], job_id: int) -> None:
    """A training or scoring job ended: advance the run it belongs to, if any."""
    if model is TrainingJob:
        mine = Q(prm_job=job_id) | Q(orm_job=job_id)
    else:
        mine = Q(prm_scoring=job_id) | Q(orm_scoring=job_id)
    for run_id in ComparisonRun.objects.filter(mine, status=JobStatus.RUNNING).values_list("pk", flat=True):
        advance(run_id)


def request_cancel_comparison(run: ComparisonRun) -> ComparisonRun:
    """Cancelled at once; the jobs it started are cancelled too (a running job when its watcher next polls)."""
    ComparisonRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    if jobs.finish(run, JobStatus.CANCELLED, error="cancelled on request"):
        run.refresh_from_db()
        _stop_jobs(run)
    run.refresh_from_db()
    return run


def reconcile(older_than_s: float = 30.0) -> list[int]:
    """For the periodic task: advance runs whose stage's jobs have all ended (their watcher's call was lost),
    and send runs that never reached the broker."""
    moved = jobs.dispatch_pending(ComparisonRun, older_than=timedelta(seconds=older_than_s))
    for run in ComparisonRun.objects.filter(status=JobStatus.RUNNING,
                                            stage__in=(ComparisonRun.Stage.TRAIN, ComparisonRun.Stage.SCORE)):
        stage_jobs = ((run.prm_job_id, run.orm_job_id, TrainingJob) if run.stage == ComparisonRun.Stage.TRAIN
                      else (run.prm_scoring_id, run.orm_scoring_id, ScoringJob))
        ids = [pk for pk in stage_jobs[:2] if pk is not None]
        if not stage_jobs[2].objects.filter(pk__in=ids, status__in=ACTIVE_STATUSES).exists():
            advance(run.pk)
            moved.append(run.pk)
    return moved
