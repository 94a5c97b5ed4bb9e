"""Active learning in the platform: a generation scores the campaign's unlabeled candidate pool with its
current best PRM, lets a strategy (``rewards.active``) choose a batch, and turns the batch into labeling work.

Flow: ``start_generation`` validates, records a ``Generation`` (status scoring) and a ``ScoringJob`` of the
pool (sent to the worker after commit). When the scoring job ends, the Celery task that watched it calls
``scoring_finished`` (and the periodic task does the same for any generation whose watcher was lost):
on success ``complete_generation`` selects and materialises, on failure the generation fails with the
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

from annotate.models import AssignmentStatus, Campaign, Completion, Membership, Role, Solution, Step
from annotate.prm800k import content_digest
from annotate.services.importing import bulk_insert
from rewards.active import Candidate as StrategyCandidate
from rewards.active import SelectionError, StrategyConfigError, make_strategy

from ..models import (
    FINAL_STATUSES,
    Candidate,
    CandidatePool,
    CandidateScore,
    Generation,
    GenerationStatus,
    JobStatus,
    Kind,
    PoolPurpose,
    RewardModel,
    ScoringJob,
)
from .scoring import start_scoring_job
from .training import JobInputError

DIGEST_CHUNK = 2000


class GenerationNotAllowed(PermissionError):
    """Only staff and the campaign's active admins start generations."""


def can_start_generation(user: Any, campaign: Campaign) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    if user.is_staff:
        return True
    return Membership.objects.filter(campaign=campaign, user=user, is_active=True, role=Role.ADMIN).exists()


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
    """g: one past every generation number the campaign has used, in its solutions or its generations."""
    used = [Solution.objects.filter(campaign=campaign).aggregate(g=Max("generation"))["g"],
            Generation.objects.filter(campaign=campaign).aggregate(g=Max("number"))["g"]]
    return max([g for g in used if g is not None] + [0]) + 1


def _open_candidates(pool: CandidatePool) -> Any:
    """Candidates that could still become labeling work: not materialised, with steps to label."""
    return Candidate.objects.filter(pool_problem__pool=pool, solution__isnull=True).exclude(steps=[])


#: the most solutions one generation may select (documented in the README)
MAX_BATCH_SIZE = 100_000


def start_generation(campaign: Campaign, *, strategy: str, batch_size: Any, config: Mapping[str, Any] | None = None,
                     user: Any = None, pool: CandidatePool | None = None, reward_model: RewardModel | None = None,
                     auto: bool = False) -> Generation:
    """Validate and record generation g; its pool scoring runs on the worker and completes it.

    Errors name the input: ``strategy``/config keys (``StrategyConfigError`` as ``JobInputError``),
    ``batch_size``, ``pool``, ``reward_model``; ``GenerationNotAllowed`` when ``user`` may not start one
    (``user=None`` is the system: the periodic task and commands).
    """
    if user is not None and not can_start_generation(user, campaign):
        raise GenerationNotAllowed(f"only staff and admins of campaign {campaign.slug} start generations")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise JobInputError("batch_size", f"must be an integer >= 1, got {batch_size!r}")
    if batch_size > MAX_BATCH_SIZE:
        raise JobInputError("batch_size", f"must be an integer <= {MAX_BATCH_SIZE:,}, got {batch_size!r}")
    if config is not None and not isinstance(config, Mapping):
        raise JobInputError("config", f"must be an object, got {type(config).__name__}")
    try:
        chosen = make_strategy(strategy, config)
    except StrategyConfigError as exc:
        raise JobInputError("strategy" if "'strategy'" in str(exc) else "config", str(exc)) from None
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
                                            f"'{chosen.name}' needs scores (use 'random' for a first generation)")
    if not _open_candidates(pool).exists():
        raise JobInputError("pool", f"pool {pool} has no unlabeled candidate left")
    try:
        with transaction.atomic():
            Campaign.objects.select_for_update().get(pk=campaign.pk)  # one g at a time per campaign
            if Generation.objects.filter(campaign=campaign, status=GenerationStatus.SCORING).exists():
                raise JobInputError("campaign", f"a generation of {campaign.slug} is still scoring")
            generation = Generation.objects.create(
                campaign=campaign, number=next_number(campaign), pool=pool, strategy=chosen.name,
                strategy_config=chosen.config, reward_model=reward_model, batch_size=batch_size,
                dataset_version=reward_model.dataset_version if reward_model else None,
                created_by=user if getattr(user, "is_authenticated", False) else None, auto_started=auto)
            if reward_model is None:  # random without a PRM: nothing to score
                generation = complete_generation(generation)
            else:
                generation.scoring_job = start_scoring_job(reward_model, pool, user=generation.created_by)
                generation.save(update_fields=["scoring_job"])
    except IntegrityError:  # a concurrent start won the partial unique constraint
        raise JobInputError("campaign", f"a generation of {campaign.slug} is still scoring") from None
    return generation


def _already_in_campaign(campaign: Campaign, digests: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(digests), DIGEST_CHUNK):
        found.update(Solution.objects.filter(campaign=campaign, content_sha256__in=digests[start:start + DIGEST_CHUNK])
                     .values_list("content_sha256", flat=True))
    return found


def complete_generation(generation: Generation) -> Generation:
    """Select the batch with the strategy and materialise it as Solutions of generation g (once)."""
    with transaction.atomic():
        generation = Generation.objects.select_for_update(of=("self",)).select_related(
            "campaign", "pool").get(pk=generation.pk)
        if generation.status != GenerationStatus.SCORING:
            return generation
        scores: dict[int, CandidateScore] = {}
        if generation.scoring_job_id is not None:
            scores = {s.candidate_id: s for s in CandidateScore.objects.filter(scoring_job=generation.scoring_job_id)}
        rows = list(_open_candidates(generation.pool).select_for_update(of=("self",))
                    .select_related("pool_problem__problem").order_by("id"))
        digests = {c.pk: content_digest(c.pool_problem.problem.text, c.steps) for c in rows}
        taken = _already_in_campaign(generation.campaign, list(digests.values()))
        strategy = make_strategy(generation.strategy, generation.strategy_config)
        pool = [StrategyCandidate(id=str(c.pk), problem_id=str(c.pool_problem.problem_id),
                                  score=scores[c.pk].score if c.pk in scores else None, is_correct=c.is_correct,
                                  already_labeled=digests[c.pk] in taken)
                for c in rows if c.pk in scores or generation.scoring_job_id is None]
        try:
            selections = strategy.select(pool, generation.batch_size)
        except SelectionError as exc:
            _fail(generation, f"selection: {exc}")
            return generation
        by_id = {c.pk: c for c in rows}
        solutions = _materialise(generation, [(by_id[int(s.candidate.id)], s.reason, s.rank) for s in selections],
                                 scores, digests)
        Generation.objects.filter(pk=generation.pk).update(
            status=GenerationStatus.COMPLETED, selected_count=len(solutions), finished_at=timezone.now())
        generation.refresh_from_db()
    return generation


def _materialise(generation: Generation, picks: list[tuple[Candidate, str, int]],
                 scores: dict[int, CandidateScore], digests: dict[int, str]) -> list[Solution]:
    """Solutions, steps and completions as rows (as ``import_solutions`` writes them), linked back."""
    solutions = []
    for candidate, reason, rank in picks:
        score = scores[candidate.pk].score if candidate.pk in scores else None
        solutions.append(Solution(
            campaign=generation.campaign, problem=candidate.pool_problem.problem, generator=generation.pool.name,
            sample_index=candidate.index, final_answer=candidate.answer, is_correct=candidate.is_correct,
            verifier_score=score, generation=generation.number, pre_generated_steps=candidate.steps,
            content_sha256=digests[candidate.pk],
            provenance={"source": "active_learning", "generation": generation.number,
                        "strategy": generation.strategy, "strategy_config": generation.strategy_config,
                        "reason": reason, "rank": rank, "reward_model_id": generation.reward_model_id,
                        "dataset_version_id": generation.dataset_version_id, "candidate_id": candidate.pk,
                        "pool_id": generation.pool_id, "score": score,
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


def _fail(generation: Generation, error: str) -> None:
    Generation.objects.filter(pk=generation.pk, status=GenerationStatus.SCORING).update(
        status=GenerationStatus.FAILED, error=error[-4000:], finished_at=timezone.now())
    generation.refresh_from_db()


def scoring_finished(scoring_job_id: int) -> Generation | None:
    """The completion hook of a generation's scoring job: complete or fail the generation once it ended."""
    generation = Generation.objects.filter(scoring_job_id=scoring_job_id, status=GenerationStatus.SCORING).first()
    if generation is None:
        return None
    job = ScoringJob.objects.get(pk=scoring_job_id)
    if job.status not in FINAL_STATUSES:
        return generation
    if job.status == JobStatus.SUCCEEDED:
        return complete_generation(generation)
    _fail(generation, f"scoring job {job.pk} {job.status}: {job.error}")
    return generation


def reconcile() -> list[int]:
    """Finish generations whose scoring job ended without its watcher calling back (a lost worker)."""
    done = []
    for generation in Generation.objects.filter(status=GenerationStatus.SCORING).select_related("scoring_job"):
        job = generation.scoring_job
        if job is None:
            _fail(generation, "its scoring job was deleted")
            done.append(generation.pk)
        elif job.status in FINAL_STATUSES:
            scoring_finished(job.pk)
            done.append(generation.pk)
    return done


def labeled_share(generation: Generation) -> float:
    """Share of a generation's selections with at least one submitted (non-gold) labeling."""
    if generation.selected_count == 0:
        return 0.0
    labeled = Solution.objects.filter(campaign=generation.campaign_id, generation=generation.number).aggregate(
        n=Count("id", distinct=True, filter=Q(assignments__status=AssignmentStatus.SUBMITTED,
                                              assignments__is_gold=False)))["n"]
    return labeled / generation.selected_count


def auto_start_generations(threshold: float | None = None) -> list[Generation]:
    """Start generation g+1 (same strategy, options and batch size) for every active campaign whose last
    generation completed and is mostly labeled (share >= ``STEPLAB_GENERATION_AUTO_LABELED_SHARE``).
    The first generation of a campaign is always started by an admin, who chooses the strategy."""
    share = float(getattr(settings, "STEPLAB_GENERATION_AUTO_LABELED_SHARE", 0.9) if threshold is None else threshold)
    reconcile()
    started = []
    last_ids = (Generation.objects.filter(campaign__is_active=True).values("campaign")
                .annotate(last=Max("id")).values_list("last", flat=True))
    for last in Generation.objects.filter(pk__in=list(last_ids)).select_related("campaign"):
        if last.status != GenerationStatus.COMPLETED or labeled_share(last) < share:
            continue
        try:
            started.append(start_generation(last.campaign, strategy=last.strategy, batch_size=last.batch_size,
                                            config=last.strategy_config, auto=True))
        except JobInputError:
            continue  # e.g. the pool is used up: nothing to start
    return started

