"""Read-side queries for the pages: a fixed number of queries whatever the number of runs and models."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Count, Q, QuerySet

from annotate.models import Assignment, AssignmentStatus, Campaign, FinishReason, MachineLabel, Solution
from annotate.permissions import (
    can_label,
    can_manage,
    can_manage_endpoints,
    can_start_labeling_round,
    can_start_machine_labeling,
)
from rewards.active import STRATEGIES
from rewards.evaluation.baselines import best_of_n_baseline_verdict
from rewards.evaluation.intervals import curve_falls, verdict
from rewards.models import DatasetVersion

from .contracts import (
    ComparisonProgress,
    Dashboard,
    DashboardPage,
    EvaluationResults,
    LoopState,
    TrainingReport,
)
from .figures import (
    best_of_n_rows,
    domain_rows,
    history_rows,
    step_metric_rows,
    trained_on_words,
    validation_of,
    withheld_reasons,
)
from .models import (
    CandidatePool,
    ComparisonRun,
    EvaluationRun,
    JobStatus,
    Kind,
    LabelingRound,
    MachineLabelingJob,
    PoolPurpose,
    RewardModel,
    SamplingJob,
    ScoringJob,
    TrainingJob,
)
from .services.comparisons import comparison_pools
from .services.evaluation import AGGREGATIONS
from .services.labeling_rounds import best_prm_of

RUNS_SHOWN = 20


def training_jobs(campaigns: QuerySet[Campaign], *, staff: bool) -> QuerySet[TrainingJob]:
    jobs = TrainingJob.objects.select_related("dataset_version__campaign", "campaign", "started_by")
    if staff:
        return jobs
    return jobs.filter(campaign__in=campaigns)


def ready_versions(campaigns: QuerySet[Campaign]) -> QuerySet[DatasetVersion]:
    return (DatasetVersion.objects.filter(campaign__in=campaigns, status=DatasetVersion.Status.READY)
            .select_related("campaign").order_by("campaign__slug", "-number"))


def _scoring_label(job: ScoringJob | None) -> dict[str, Any] | None:
    if job is None:
        return None
    model = job.reward_model
    return {"model": model.name, "model_id": model.pk, "kind": model.kind, "scoring_job": job.pk,
            "dataset_version": str(model.dataset_version) if model.dataset_version else None,
            "trained_on": model.trained_on}


def judged_beside_baselines(job: TrainingJob) -> dict[str, Any] | None:
    """A PRM training job's held-out figures beside the baselines': its model's newest scoring that computed them
    (the step-level row of the dashboard), or None before one did."""
    scoring = (ScoringJob.objects.filter(reward_model__job=job, reward_model__kind=Kind.PRM,
                                         status=JobStatus.SUCCEEDED, step_metrics__has_key="baselines")
               .select_related("reward_model__dataset_version__campaign").order_by("-finished_at", "-id").first())
    return step_metric_rows([scoring])[0] if scoring is not None else None


def dashboard(campaigns: QuerySet[Campaign], campaign: Campaign | None = None) -> Dashboard:
    """The figures the dashboard shows (their rows are also served as JSON/CSV downloads)."""
    if campaign is None:  # one campaign's figures at a time: the one evaluated last (a table never mixes two)
        newest = (EvaluationRun.objects.filter(campaign__in=campaigns).select_related("campaign")
                  .order_by("-created_at", "-id").first())
        shown = newest.campaign if newest is not None else None
    else:
        shown = campaign
    scope = [shown.pk] if shown is not None else []
    runs = list(EvaluationRun.objects.filter(campaign__in=scope).select_related(
        "pool", "prm_scoring__reward_model__dataset_version__campaign",
        "orm_scoring__reward_model__dataset_version__campaign")
        .order_by("-created_at", "-id")[:RUNS_SHOWN])
    scorings = list(ScoringJob.objects.filter(reward_model__campaign__in=scope, reward_model__kind=Kind.PRM,
                                              status=JobStatus.SUCCEEDED).exclude(step_metrics={})
                    .select_related("reward_model__dataset_version__campaign").order_by("-finished_at", "-id")[:200])
    latest = runs[0] if runs else None
    results = EvaluationResults.of(latest) if latest is not None else None
    step_rows = step_metric_rows(scorings)
    paired = results.paired if results is not None else {}
    n = results.largest_n if results is not None else None
    return Dashboard(
        latest=latest, results=results, figures_campaign=shown, verdict=verdict(paired),
        verdict_baseline=best_of_n_baseline_verdict(results.baselines, paired, n)
        if results is not None and n is not None else None,
        withheld=withheld_reasons(latest, step_rows),
        curve_falls=curve_falls(results.curve) if results is not None else [],
        no_flag_advice=next((row["advice"] for row in step_rows if row["advice"]), None),
        runs=[_run_row(run) for run in runs],
        best_of_n=best_of_n_rows(latest) if latest else [],
        per_domain=domain_rows(latest) if latest else [],
        step_level=step_rows,
        data_efficiency=[{"kind": kind, **point} for kind, points in
                         (latest.data_efficiency.items() if latest else []) for point in points],
        history=history_rows(runs),
        generations=labeling_round_rows(campaign) if campaign is not None else [],
    )


def _run_row(run: EvaluationRun) -> dict[str, Any]:
    """An evaluation as the dashboard's downloads list it."""
    results = EvaluationResults.of(run)
    return {"id": run.pk, "pool": run.pool.name, "created_at": run.created_at.isoformat(), "trials": run.trials,
            "aggregation": run.aggregation, "problems": results.problems, "pool_size": results.pool_size,
            "prm": _scoring_label(run.prm_scoring), "orm": _scoring_label(run.orm_scoring)}


def dashboard_page(campaigns: QuerySet[Campaign], campaign: Campaign | None, *, user: Any,
                   forms: Mapping[str, Any]) -> DashboardPage:
    """The dashboard of ``campaign`` (or of the campaign evaluated last) as ``user`` sees it, with its start forms."""
    loop = loop_state(campaign) if campaign is not None else None
    may_label = may_manage = False
    if campaign is not None and loop is not None and not loop.labeled:  # only there it offers labeling or inviting
        may_label, may_manage = can_label(user, campaign), can_manage(user, campaign)
    return DashboardPage(
        campaign=campaign, campaigns=campaigns.order_by("slug"), data=dashboard(campaigns, campaign), loop=loop,
        can_label=may_label, can_manage=may_manage,
        can_start_labeling_round=campaign is not None and can_start_labeling_round(user, campaign),
        can_start_machine_labeling=campaign is not None and can_start_machine_labeling(user, campaign),
        can_manage_endpoints=campaign is not None and can_manage_endpoints(user, campaign),
        strategies=sorted(STRATEGIES), aggregations=AGGREGATIONS, purposes=list(PoolPurpose.choices),
        sampling_jobs=sampling_jobs(campaign) if campaign is not None else [],
        machine_labeling_jobs=machine_labeling_jobs(campaign) if campaign is not None else [],
        label_sources=label_sources(campaign) if campaign is not None else [],
        prms=campaign_prms(campaign) if campaign is not None else [],
        compare_pools=comparison_pools(campaign) if campaign is not None else [], forms=forms)


def reward_model_rows(campaigns: QuerySet[Campaign], *, staff: bool, limit: int = 100
                      ) -> list[tuple[RewardModel, str]]:
    """The registered models the user may see, each with what its training set counts in words."""
    return [(model, trained_on_words(model)) for model in reward_models(campaigns, staff=staff)[:limit]]


def reward_models(campaigns: QuerySet[Campaign], *, staff: bool) -> QuerySet[RewardModel]:
    models = RewardModel.objects.select_related("dataset_version__campaign", "campaign")
    return models if staff else models.filter(campaign__in=campaigns)


def reward_model(pk: int) -> RewardModel | None:
    return RewardModel.objects.filter(pk=pk).first()


def campaign_reward_models(campaign: Campaign, ids: Iterable[int]) -> list[RewardModel]:
    """The campaign's own reward models among ``ids``."""
    return list(RewardModel.objects.filter(pk__in=ids, campaign=campaign))


def campaign_pool(campaign: Campaign, pk: int) -> CandidatePool | None:
    return CandidatePool.objects.filter(pk=pk, campaign=campaign).first()


def _validation(model: RewardModel) -> dict[str, Any]:
    validation = validation_of(model)
    return {"model": model.name, "model_id": model.pk,
            "step_auroc": validation.step_level.auroc if validation.step_level else None,
            "solution_accuracy": validation.solution_level.accuracy if validation.solution_level else None}


def sampling_jobs(campaign: Campaign, limit: int = 10) -> list[SamplingJob]:
    """The campaign's latest sampling jobs with their pools (one query)."""
    return list(SamplingJob.objects.filter(campaign=campaign).select_related("pool")[:limit])


def machine_labeling_jobs(campaign: Campaign, limit: int = 10) -> list[MachineLabelingJob]:
    """The campaign's latest machine labeling jobs with their PRMs (one query)."""
    return list(MachineLabelingJob.objects.filter(campaign=campaign).select_related("reward_model")[:limit])


def label_sources(campaign: Campaign) -> list[dict[str, Any]]:
    """The campaign's machine label sources: solutions and steps each labels (one query)."""
    rows = (MachineLabel.objects.filter(solution__campaign=campaign).values("kind", "source")
            .annotate(solutions=Count("solution_id", distinct=True), steps=Count("id")).order_by("kind", "source"))
    return [{**row, "key": f"{row['kind']}:{row['source']}"} for row in rows]


def campaign_prms(campaign: Campaign) -> list[RewardModel]:
    """The PRMs that may label the campaign's steps: its own and unassigned ones (one query)."""
    return list(RewardModel.objects.filter(Q(campaign=campaign) | Q(campaign__isnull=True), kind=Kind.PRM))


def labeling_round_rows(campaign: Campaign) -> list[dict[str, Any]]:
    """Per generation: selected, labeled, the share of labeled convincing-wrong selections where a labeler
    found an error, and the PRM retrained after it.

    "Retrained after g": the best PRM (``services.labeling_rounds`` rule) on the newest ready dataset version cut
    after g completed and before g+1 started, i.e. the version that holds g's labels when g+1 chooses.
    Four queries whatever the number of generations.
    """
    generations = list(LabelingRound.objects.filter(campaign=campaign).select_related("reward_model", "created_by")
                       .order_by("number"))
    if not generations:
        return []
    submitted = Q(assignments__status=AssignmentStatus.SUBMITTED, assignments__is_gold=False)
    cw = Q(provenance__reason="convincing_wrong")
    counts: dict[int | None, Mapping[str, Any]] = {row["generation"]: row for row in Solution.objects.filter(
        campaign=campaign, generation__in=[g.number for g in generations], provenance__source="active_learning")
        .values("generation").annotate(
            labeled=Count("id", distinct=True, filter=submitted),
            cw_labeled=Count("id", distinct=True, filter=cw & submitted),
            cw_found=Count("id", distinct=True, filter=cw & submitted
                           & Q(assignments__finish_reason=FinishReason.FOUND_ERROR)))}
    versions = list(DatasetVersion.objects.filter(campaign=campaign, status=DatasetVersion.Status.READY)
                    .values_list("pk", "number", "created_at").order_by("number"))
    prms = list(RewardModel.objects.filter(campaign=campaign, kind=Kind.PRM, job__status=JobStatus.SUCCEEDED,
                                           dataset_version__isnull=False).select_related("dataset_version"))
    rows = []
    for position, generation in enumerate(generations):
        row = counts.get(generation.number, {})
        after, until = generation.finished_at, (generations[position + 1].created_at
                                                if position + 1 < len(generations) else None)
        version = None
        if after is not None:
            inside = [v for v in versions if v[2] > after and (until is None or v[2] <= until)]
            version = inside[-1] if inside else None
        retrained = best_prm_of([m for m in prms if version and m.dataset_version_id == version[0]])
        labeled, cw_labeled = row.get("labeled", 0), row.get("cw_labeled", 0)
        rows.append({
            "generation": generation.number, "id": generation.pk, "status": generation.status,
            "strategy": generation.strategy, "strategy_config": generation.strategy_config,
            "batch_size": generation.batch_size, "selected": generation.selected_count, "labeled": labeled,
            "convincing_wrong_labeled": cw_labeled, "found_error": row.get("cw_found", 0),
            "found_error_share": (row.get("cw_found", 0) / cw_labeled) if cw_labeled else None,
            "chosen_by": generation.reward_model.name if generation.reward_model else None,
            "chosen_by_id": generation.reward_model_id, "dataset_version_id": generation.dataset_version_id,
            "auto_started": generation.auto_started, "error": generation.error,
            "created_at": generation.created_at.isoformat(),
            "retrained_on": f"v{version[1]}" if version else None,
            "retrained": _validation(retrained) if retrained else None,
        })
    return rows


def comparison_run(pk: int) -> ComparisonRun:
    """A comparison with everything its progress view names (one query)."""
    return ComparisonRun.objects.select_related(
        "campaign", "pool", "source_pool", "dataset_version__campaign", "prm_job", "orm_job", "prm_scoring",
        "orm_scoring", "evaluation", "started_by").get(pk=pk)


def comparison_progress(pk: int) -> ComparisonProgress:
    """A comparison with its two trainings' reports (one query)."""
    return ComparisonProgress.of(comparison_run(pk))


def training_report(job: TrainingJob) -> TrainingReport:
    """A training job with its metrics typed and its artefact checks in plain words."""
    return TrainingReport.of(job)


def loop_state(campaign: Campaign) -> LoopState:
    """What the dashboard's step-by-step section lists: versions, pools, models, scorings, the latest run."""
    run = ComparisonRun.objects.filter(campaign=campaign).values_list("pk", flat=True).first()
    pools = list(CandidatePool.objects.filter(campaign=campaign).order_by("-created_at", "-id")[:20])
    return LoopState(
        run=comparison_run(run) if run else None,
        versions=list(DatasetVersion.objects.filter(campaign=campaign, status=DatasetVersion.Status.READY)
                      .order_by("-number")[:5]),
        pools=pools,
        labeling_pool=next((p for p in pools if p.purpose == PoolPurpose.LABELING), None),
        # no finished labeling: nothing to train on, the page says to label first
        labeled=Assignment.objects.filter(solution__campaign=campaign, status=AssignmentStatus.SUBMITTED).exists(),
        models=list(RewardModel.objects.filter(campaign=campaign, job__status=JobStatus.SUCCEEDED)
                    .select_related("dataset_version__campaign").order_by("-created_at", "-id")[:20]),
        scorings=list(ScoringJob.objects.filter(reward_model__campaign=campaign)
                      .select_related("reward_model", "pool").order_by("-created_at", "-id")[:20]),
    )


def labeling_pool(campaign: Campaign) -> CandidatePool | None:
    """The newest of the campaign's newest 20 pools that is for labeling: the one a labeling round chooses from."""
    return loop_state(campaign).labeling_pool

