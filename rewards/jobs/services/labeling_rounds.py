"""Active learning in the platform: a labeling round scores the campaign's unlabeled candidate pool with its
current best PRM, lets a strategy (``rewards.active``) choose a batch, and turns the batch into labeling work.

Flow: ``start_labeling_round`` validates, records a ``LabelingRound`` (status scoring) and a ``ScoringJob`` of the
pool (sent to the worker after commit). When the scoring job ends, the Celery task that watched it calls
``scoring_finished`` (and the periodic task does the same for any labeling round whose watcher was lost):
on success ``complete_labeling_round`` selects and materialises, on failure the labeling round fails with the
scoring job's error. Completing is guarded by a row lock and the status, so it happens once.

The current best PRM of a campaign (``best_prm``): among its registered PRMs, those trained on the
highest-numbered dataset version (a model trained on a file, with no version, ranks below any version);
among those, the highest validation step AUROC (none counts as lowest); then the newest.

A candidate is never selected twice: once materialised, ``Candidate.solution`` points at its Solution, and
candidates whose (problem, steps) digest equals a solution already in the campaign (imported or labeled
by other means) are skipped as well.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from annotate.models import AssignmentStatus, Campaign, Completion, Solution, Step
from annotate.permissions import SYSTEM, Actor, NotAllowed, account_of, actor_for, can_start_labeling_round, require
from annotate.prm800k import content_digest
from endpoints.models import Endpoint
from rewards.active import ScoredCandidate, SelectionError, StrategyConfigError, make_strategy
from steplab import events
from steplab.bulk import bulk_insert

from ..models import (
    FINAL_STATUSES,
    Candidate,
    CandidatePool,
    CandidateScore,
    JobStatus,
    Kind,
    LabelingRound,
    PoolPurpose,
    RewardModel,
    SamplingJob,
    ScoringJob,
)
from .sampling import FEEDS, start_sampling_job
from .scoring import start_scoring_job
from .training import JobInputError

DIGEST_CHUNK = 2000


class LabelingRoundNotAllowed(NotAllowed):
    """Only staff and the campaign's active admins start labeling rounds."""


def _auroc(model: RewardModel) -> float:
    value = ((model.metrics.get("validation") or {}).get("step_level") or {}).get("auroc")
    return float(value) if isinstance(value, (int, float)) else -1.0


def best_prm_of(models: list[RewardModel]) -> RewardModel | None:
    """The best of some PRMs by the rule in the module docstring (``dataset_version`` selected with them)."""
    if not models:
        return None
    return max(models, key=lambda m: (m.dataset_version.number if m.dataset_version else 0, _auroc(m),
                                      m.created_at, m.pk))


def best_prm(campaign: Campaign) -> RewardModel | None:
    """The campaign's current best PRM."""
    return best_prm_of(list(RewardModel.objects.filter(campaign=campaign, kind=Kind.PRM,
                                                       job__status=JobStatus.SUCCEEDED)
                            .select_related("dataset_version")))


def labeling_pool(campaign: Campaign) -> CandidatePool | None:
    """The campaign's candidate pool: its newest pool imported with purpose labeling."""
    return CandidatePool.objects.filter(campaign=campaign, purpose=PoolPurpose.LABELING).order_by(
        "-created_at", "-id").first()


def next_number(campaign: Campaign) -> int:
    """g: one past every labeling round number the campaign has used, in its solutions or its generations."""
    used = [Solution.objects.filter(campaign=campaign).aggregate(g=Max("generation"))["g"],
            LabelingRound.objects.filter(campaign=campaign).aggregate(g=Max("number"))["g"]]
    return max([g for g in used if g is not None] + [0]) + 1


def _open_candidates(pool: CandidatePool) -> Any:
    """Candidates that could still become labeling work: not materialised, with steps to label."""
    return Candidate.objects.filter(pool_problem__pool=pool, solution__isnull=True).exclude(steps=[])


#: the most solutions one labeling round may select (docs/operations.md, "Job settings")
MAX_BATCH_SIZE = 100_000


def start_labeling_round(campaign: Campaign, *, strategy: str, batch_size: Any,
                         config: Mapping[str, Any] | None = None, user: Actor, pool: CandidatePool | None = None,
                         reward_model: RewardModel | None = None, auto: bool = False) -> LabelingRound:
    """Validate and record labeling round g; its pool scoring runs on the worker and completes it.

    Errors name the input: ``strategy``/config keys (``StrategyConfigError`` as ``JobInputError``),
    ``batch_size``, ``pool``, ``reward_model``; ``LabelingRoundNotAllowed`` when ``user`` may not start one
    (``SYSTEM``: the periodic task and commands).
    """
    chosen = _checked_round(campaign, strategy=strategy, batch_size=batch_size, config=config, user=user)
    pool = pool or labeling_pool(campaign)
    if pool is None:
        raise JobInputError("pool", f"campaign {campaign.slug} has no candidate pool to choose from: upload one "
                                    "(purpose labeling) or sample candidates first")
    if pool.campaign_id != campaign.pk:
        raise JobInputError("pool", f"pool {pool} does not belong to campaign {campaign.slug}")
    if reward_model is None:
        reward_model = best_prm(campaign)
    elif reward_model.kind != Kind.PRM:
        raise JobInputError("reward_model", f"{reward_model} is a {reward_model.kind}, not a prm")
    if reward_model is None and chosen.needs_scores:
        raise JobInputError("reward_model", f"campaign {campaign.slug} has no trained PRM yet; strategy "
                                            f"'{chosen.name}' needs scores (use 'random' for a first labeling_round)")
    if not _open_candidates(pool).exists():
        raise JobInputError("pool", f"pool {pool} has no unlabeled candidate left")
    try:
        with transaction.atomic():
            Campaign.objects.select_for_update().get(pk=campaign.pk)  # one g at a time per campaign
            if LabelingRound.objects.filter(campaign=campaign, status=LabelingRound.Status.SCORING).exists():
                raise JobInputError("campaign", f"a generation of {campaign.slug} is still scoring")
            labeling_round = LabelingRound.objects.create(
                campaign=campaign, number=next_number(campaign), pool=pool, strategy=chosen.name,
                strategy_config=chosen.config, reward_model=reward_model, batch_size=batch_size,
                dataset_version=reward_model.dataset_version if reward_model else None,
                created_by=account_of(user), auto_started=auto)
            if reward_model is None:  # random without a PRM: nothing to score
                labeling_round = complete_labeling_round(labeling_round)
            else:
                labeling_round.scoring_job = start_scoring_job(reward_model, pool=pool, user=user)
                labeling_round.save(update_fields=["scoring_job"])
    except IntegrityError:  # a concurrent start won the partial unique constraint
        raise JobInputError("campaign", f"a generation of {campaign.slug} is still scoring") from None
    return labeling_round


def _checked_round(campaign: Campaign, *, strategy: str, batch_size: Any, config: Mapping[str, Any] | None,
                   user: Actor) -> Any:
    """The strategy a round may start with, after the permission and its settings' checks."""
    try:
        require(can_start_labeling_round, user, campaign,
                f"only staff and admins of campaign {campaign.slug} start generations")
    except NotAllowed as exc:
        raise LabelingRoundNotAllowed(str(exc)) from None
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise JobInputError("batch_size", f"must be an integer >= 1, got {batch_size!r}")
    if batch_size > MAX_BATCH_SIZE:
        raise JobInputError("batch_size", f"must be an integer <= {MAX_BATCH_SIZE:,}, got {batch_size!r}")
    if config is not None and not isinstance(config, Mapping):
        raise JobInputError("config", f"must be an object, got {type(config).__name__}")
    try:
        return make_strategy(strategy, config)
    except StrategyConfigError as exc:
        raise JobInputError("strategy" if "'strategy'" in str(exc) else "config", str(exc)) from None


def sample_for_labeling_round(campaign: Campaign, *, endpoint: Endpoint, strategy: str, batch_size: Any,
                              config: Mapping[str, Any] | None = None, sampling: Mapping[str, Any] | None = None,
                              user: Actor) -> SamplingJob:
    """A labeling round whose candidates come fresh from a served policy: a sampling job on ``endpoint``
    (``sampling``: its keys) whose pool, once it succeeds, the round chooses from (``sampling_finished``).
    Errors name the input as ``start_labeling_round``'s and ``start_sampling_job``'s do."""
    chosen = _checked_round(campaign, strategy=strategy, batch_size=batch_size, config=config, user=user)
    if chosen.needs_scores and best_prm(campaign) is None:
        raise JobInputError("reward_model", f"campaign {campaign.slug} has no trained PRM yet; strategy "
                                            f"'{chosen.name}' needs scores (use 'random' for a first labeling_round)")
    return start_sampling_job(campaign, config=sampling, endpoint=endpoint, user=user, feeds={
        "strategy": chosen.name, "strategy_config": chosen.config, "batch_size": batch_size,
        "by_system": user is SYSTEM})


def sampling_finished(sampling_job_id: int) -> LabelingRound | None:
    """The follow-up of a sampling job that feeds a labeling round: once it succeeded, the round starts on its
    pool, as the job's starter (once: the job's summary records the round, or why it could not start)."""
    job = SamplingJob.objects.select_related("campaign", "pool", "started_by").filter(pk=sampling_job_id).first()
    if job is None or FEEDS not in job.config or job.status != JobStatus.SUCCEEDED or job.pool is None:
        return None
    if "labeling_round" in job.summary or "labeling_round_error" in job.summary:
        return None
    feeds = job.config[FEEDS]
    labeling_round = None
    try:
        labeling_round = start_labeling_round(
            job.campaign, strategy=feeds["strategy"], batch_size=feeds["batch_size"],
            config=feeds["strategy_config"], pool=job.pool,
            user=actor_for(job.started_by, system=bool(feeds.get("by_system"))))
    except (JobInputError, NotAllowed) as exc:
        note: dict[str, Any] = {"labeling_round_error": str(exc)}
    else:
        note = {"labeling_round": labeling_round.pk}
    SamplingJob.objects.filter(pk=job.pk).update(summary={**job.summary, **note})
    return labeling_round


def _already_in_campaign(campaign: Campaign, digests: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(digests), DIGEST_CHUNK):
        found.update(Solution.objects.filter(campaign=campaign, content_sha256__in=digests[start:start + DIGEST_CHUNK])
                     .values_list("content_sha256", flat=True))
    return found


def complete_labeling_round(labeling_round: LabelingRound) -> LabelingRound:
    """Select the batch with the strategy and materialise it as Solutions of labeling round g (once)."""
    with transaction.atomic():
        labeling_round = LabelingRound.objects.select_for_update(of=("self",)).select_related(
            "campaign", "pool").get(pk=labeling_round.pk)
        if labeling_round.status != LabelingRound.Status.SCORING:
            return labeling_round
        scores: dict[int, CandidateScore] = {}
        if labeling_round.scoring_job_id is not None:
            scores = {s.candidate_id: s
                      for s in CandidateScore.objects.filter(scoring_job=labeling_round.scoring_job_id)}
        rows = list(_open_candidates(labeling_round.pool).select_for_update(of=("self",))
                    .select_related("pool_problem__problem").order_by("id"))
        digests = {c.pk: content_digest(c.pool_problem.problem.text, c.steps) for c in rows}
        taken = _already_in_campaign(labeling_round.campaign, list(digests.values()))
        strategy = make_strategy(labeling_round.strategy, labeling_round.strategy_config)
        pool = [ScoredCandidate(id=str(c.pk), problem_id=str(c.pool_problem.problem_id),
                                  score=scores[c.pk].score if c.pk in scores else None, is_correct=c.is_correct,
                                  already_labeled=digests[c.pk] in taken)
                for c in rows if c.pk in scores or labeling_round.scoring_job_id is None]
        try:
            selections = strategy.select(pool, labeling_round.batch_size)
        except SelectionError as exc:
            _fail(labeling_round, f"selection: {exc}")
            return labeling_round
        by_id = {c.pk: c for c in rows}
        solutions = _materialise(labeling_round, [(by_id[int(s.candidate.id)], s.reason, s.rank) for s in selections],
                                 scores, digests)
        LabelingRound.objects.filter(pk=labeling_round.pk).update(
            status=LabelingRound.Status.COMPLETED, selected_count=len(solutions), finished_at=timezone.now())
        labeling_round.refresh_from_db()
        events.emit_on_commit(events.Name.LABELING_ROUND_COMPLETED, campaign_id=labeling_round.campaign_id,
                              data={"labeling_round": labeling_round.pk, "number": labeling_round.number,
                                    "selected": len(solutions)})
    return labeling_round


def _materialise(labeling_round: LabelingRound, picks: list[tuple[Candidate, str, int]],
                 scores: dict[int, CandidateScore], digests: dict[int, str]) -> list[Solution]:
    """Solutions, steps and completions as rows (as ``import_solutions`` writes them), linked back."""
    solutions = []
    for candidate, reason, rank in picks:
        score = scores[candidate.pk].score if candidate.pk in scores else None
        solutions.append(Solution(
            campaign=labeling_round.campaign, problem=candidate.pool_problem.problem,
            generator=labeling_round.pool.name,
            sample_index=candidate.index, final_answer=candidate.answer, is_correct=candidate.is_correct,
            verifier_score=score, generation=labeling_round.number, pre_generated_steps=candidate.steps,
            content_sha256=digests[candidate.pk],
            provenance={"source": "active_learning", "generation": labeling_round.number,
                        "strategy": labeling_round.strategy, "strategy_config": labeling_round.strategy_config,
                        "reason": reason, "rank": rank, "reward_model_id": labeling_round.reward_model_id,
                        "dataset_version_id": labeling_round.dataset_version_id, "candidate_id": candidate.pk,
                        "pool_id": labeling_round.pool_id, "score": score,
                        # how a sampled candidate was made: model, prompt template, temperature, N, tokens
                        **({"sampled": candidate.provenance} if candidate.provenance else {})}))
    bulk_insert(solutions)
    steps = [Step(solution=s, index=i) for s, (c, _, _) in zip(solutions, picks, strict=True)
             for i in range(len(c.steps))]
    bulk_insert(steps)
    step_iter = iter(steps)
    bulk_insert([Completion(step=next(step_iter), index=0, text=text) for c, _, _ in picks for text in c.steps])
    for solution, (candidate, _, _) in zip(solutions, picks, strict=True):
        candidate.solution = solution
    Candidate.objects.bulk_update([c for c, _, _ in picks], ["solution"], batch_size=1000)
    return solutions


def _fail(labeling_round: LabelingRound, error: str) -> None:
    LabelingRound.objects.filter(pk=labeling_round.pk, status=LabelingRound.Status.SCORING).update(
        status=LabelingRound.Status.FAILED, error=error[-4000:], finished_at=timezone.now())
    labeling_round.refresh_from_db()


def scoring_finished(scoring_job_id: int) -> LabelingRound | None:
    """The completion hook of a labeling round's scoring job: complete or fail the labeling round once it ended."""
    labeling_round = LabelingRound.objects.filter(scoring_job_id=scoring_job_id,
                                                  status=LabelingRound.Status.SCORING).first()
    if labeling_round is None:
        return None
    job = ScoringJob.objects.get(pk=scoring_job_id)
    if job.status not in FINAL_STATUSES:
        return labeling_round
    if job.status == JobStatus.SUCCEEDED:
        return complete_labeling_round(labeling_round)
    _fail(labeling_round, f"scoring job {job.pk} {job.status}: {job.error}")
    return labeling_round


def reconcile() -> list[int]:
    """Finish labeling rounds whose scoring job ended without its watcher calling back (a lost worker), and start
    those whose sampling job did."""
    done = []
    fed = (SamplingJob.objects.filter(status=JobStatus.SUCCEEDED, pool__isnull=False, config__has_key=FEEDS)
           .exclude(summary__has_key="labeling_round").exclude(summary__has_key="labeling_round_error"))
    for pk in fed.values_list("pk", flat=True):
        started = sampling_finished(pk)
        if started is not None:
            done.append(started.pk)
    scoring = LabelingRound.objects.filter(status=LabelingRound.Status.SCORING).select_related("scoring_job")
    for labeling_round in scoring:
        job = labeling_round.scoring_job
        if job is None:
            _fail(labeling_round, "its scoring job was deleted")
            done.append(labeling_round.pk)
        elif job.status in FINAL_STATUSES:
            scoring_finished(job.pk)
            done.append(labeling_round.pk)
    return done


def labeled_share(labeling_round: LabelingRound) -> float:
    """Share of a labeling round's selections with at least one submitted (non-gold) labeling."""
    if labeling_round.selected_count == 0:
        return 0.0
    labeled = Solution.objects.filter(campaign=labeling_round.campaign_id, generation=labeling_round.number).aggregate(
        n=Count("id", distinct=True, filter=Q(assignments__status=AssignmentStatus.SUBMITTED,
                                              assignments__is_gold=False)))["n"]
    return labeled / labeling_round.selected_count


def auto_start_labeling_rounds(threshold: float | None = None) -> list[LabelingRound]:
    """Start labeling round g+1 (same strategy, options and batch size) for every active campaign whose last
    labeling round completed and is mostly labeled (share >= ``STEPLAB_LABELING_ROUND_AUTO_LABELED_SHARE``).
    The first labeling round of a campaign is always started by an admin, who chooses the strategy."""
    share = settings.STEPLAB_LABELING_ROUND_AUTO_LABELED_SHARE if threshold is None else threshold
    reconcile()
    started = []
    last_ids = (LabelingRound.objects.filter(campaign__is_active=True).values("campaign")
                .annotate(last=Max("id")).values_list("last", flat=True))
    for last in LabelingRound.objects.filter(pk__in=list(last_ids)).select_related("campaign"):
        if last.status != LabelingRound.Status.COMPLETED or labeled_share(last) < share:
            continue
        try:
            started.append(start_labeling_round(last.campaign, strategy=last.strategy, batch_size=last.batch_size,
                                                config=last.strategy_config, user=SYSTEM, auto=True))
        except JobInputError:
            continue  # e.g. the pool is used up: nothing to start
    return started

