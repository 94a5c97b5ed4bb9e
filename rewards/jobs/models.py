"""Reward-model jobs: training and scoring runs, the models they register, candidate pools, evaluations.

A job row is the single source of truth for a run that happens elsewhere (a subprocess, a Slurm job, a
Kubernetes Job): the Celery watcher copies progress, log tail and heartbeats into it, so the web side
never reads a worker's disk. Status moves only forward (queued → running → succeeded/failed/cancelled)
through the conditional UPDATEs of ``steplab.jobs``.
"""
from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from annotate.models import Campaign, PositionedRow, Problem, position_meta
from rewards.evaluation.intervals import threshold_verdict
from rewards.models import NumberedPerCampaign
from steplab.jobs import ACTIVE_STATUSES as ACTIVE_STATUSES  # re-exported: job code finds the job layer's
from steplab.jobs import FINAL_STATUSES as FINAL_STATUSES  # names next to the job models
from steplab.jobs import Job
from steplab.jobs import JobStatus as JobStatus

from .text import clean_log, failure_summary


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local subprocess (Celery gpu queue)"
    SLURM = "slurm", "Slurm (sbatch)"
    KUBERNETES = "kubernetes", "Kubernetes Job"


class LaunchedJob(Job):
    """A job whose commands run elsewhere (a subprocess, Slurm, Kubernetes) under a watcher task: where it
    runs, how far it got, its heartbeats (``rewards.jobs.services.runner``)."""

    backend = models.CharField(max_length=16, choices=BackendKind.choices, default=BackendKind.LOCAL)
    progress = models.FloatField(default=0.0, help_text="0..1")
    work_dir = models.CharField(max_length=500, blank=True, help_text="Folder with the job's script, logs, outputs.")
    external_id = models.CharField(max_length=200, blank=True, help_text="pid / Slurm job id / Kubernetes Job name.")
    log_tail = models.TextField(blank=True, help_text="Last lines of the process output.")
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta(Job.Meta):
        abstract = True

    #: the URL name of its page (which holds its Cancel button)
    page_name: ClassVar[str]

    def task_queue(self) -> str:
        """A local job's watcher starts the subprocess on a ``gpu`` worker; a scheduler's only polls."""
        return "gpu" if self.backend == BackendKind.LOCAL else "default"

    def get_absolute_url(self) -> str:
        return reverse(self.page_name, args=[self.pk])

    @property
    def error_summary(self) -> str:
        return failure_summary(self.error)

    @property
    def readable_log(self) -> str:
        return clean_log(self.log_tail)


class Kind(models.TextChoices):
    PRM = "prm", "Process reward model (per step)"
    ORM = "orm", "Outcome reward model (per solution)"


class TrainingJob(LaunchedJob):
    """One PRM or ORM fine-tuning run of ``python -m rewards.training train``."""

    task_name = "jobs.run_training_job"
    page_name = "jobs:job"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="training_jobs")
    dataset_version = models.ForeignKey("rewards.DatasetVersion", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="training_jobs")
    dataset_path = models.CharField(max_length=500, help_text="The dataset file actually trained on.")
    config = models.JSONField(default=dict, help_text="The job file given to the trainer.")
    output_dir = models.CharField(max_length=500, blank=True)
    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(null=True, blank=True)
    curve = models.JSONField(default=list, blank=True, help_text="[{step, loss, learning_rate, examples_per_s}]")
    metrics = models.JSONField(default=dict, blank=True)
    auto_started = models.BooleanField(default=False, help_text="Started by the periodic new-data task.")
    started_because = models.CharField(max_length=200, blank=True,
                                       help_text="Why an automatic job started (e.g. 120 new labeled solutions).")

    class Meta(LaunchedJob.Meta):
        indexes = [
            models.Index(fields=["heartbeat_at"], name="trainingjob_running_idx", condition=Q(status="running")),
            models.Index(fields=["campaign", "-created_at"], name="trainingjob_campaign_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"

    def progress_words(self) -> str:
        return f"{self.step} of {self.total_steps} steps" if self.total_steps else f"step {self.step}"

    @property
    def threshold_verdict(self) -> str | None:
        """What the PRM's stored threshold buys over 0.5 on its validation rows, when they did not choose it."""
        validation = (self.metrics or {}).get("validation") or {}
        return threshold_verdict(validation["intervals"]) if validation.get("intervals") else None

    @property
    def started_how(self) -> str:
        """Who started it and why, as the pages say it."""
        if self.auto_started:
            return f"automatic: {self.started_because}" if self.started_because else "automatic"
        return str(self.started_by) if self.started_by else "—"


class RewardModel(models.Model):
    """A trained model registered by a succeeded job; what scoring and active learning use."""

    job = models.OneToOneField(TrainingJob, on_delete=models.PROTECT, related_name="reward_model")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="reward_models")
    dataset_version = models.ForeignKey("rewards.DatasetVersion", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="reward_models")
    name = models.CharField(max_length=200)
    location = models.CharField(max_length=500, help_text="Model folder (safetensors, config, tokenizer).")
    base_model = models.CharField(max_length=500)
    metrics = models.JSONField(default=dict)
    trained_on = models.PositiveIntegerField(default=0, help_text="Labeled solutions in its training set.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class Recorded(models.Model):
    """A record someone made from the pages or the API (a pool, an evaluation): when and by whom; lists show
    the newest first."""

    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


class PoolPurpose(models.TextChoices):
    EVALUATION = "evaluation", "Held-out problems for best-of-N evaluation"
    LABELING = "labeling", "Candidates to label (active learning chooses from it)"


class CandidatePool(Recorded):
    """N sampled solutions per problem, graded against the ground truth: held-out problems for best-of-N,
    or (``purpose`` labeling) the campaign's candidate pool its labeling rounds choose from."""

    name = models.CharField(max_length=200)
    purpose = models.CharField(max_length=16, choices=PoolPurpose.choices, default=PoolPurpose.EVALUATION)
    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="candidate_pools")
    source = models.CharField(max_length=500, blank=True, help_text="File it was imported from.")
    split_rule = models.CharField(max_length=200, default="auto")
    problem_count = models.PositiveIntegerField(default=0)
    candidate_count = models.PositiveIntegerField(default=0)
    pool_size = models.PositiveIntegerField(default=0, help_text="Largest number of candidates of one problem.")
    comparison_default = models.BooleanField(
        default=False, help_text="The pool “Compare PRM and ORM” offers first in its campaign (else the largest).")

    class Meta(Recorded.Meta):
        # a name is looked up inside its campaign only, so another campaign can neither see nor take it
        constraints = [models.UniqueConstraint(fields=["campaign", "name"], name="candidatepool_name_per_campaign"),
                       models.UniqueConstraint(fields=["name"], condition=Q(campaign__isnull=True),
                                               name="candidatepool_name_staff_pools")]

    def __str__(self) -> str:
        return self.name


class PoolProblem(PositionedRow):
    noun, parent = "problem", "pool"
    pool = models.ForeignKey(CandidatePool, on_delete=models.CASCADE, related_name="problems")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="+")
    source_id = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["pool", "index"]
        constraints = [models.UniqueConstraint(fields=["pool", "problem"], name="poolproblem_unique")]


class Candidate(PositionedRow):
    noun, parent = "candidate", "pool_problem"
    pool_problem = models.ForeignKey(PoolProblem, on_delete=models.CASCADE, related_name="candidates")
    text = models.TextField()
    steps = models.JSONField(default=list)
    # NULL is "no answer reached", which the evaluation counts apart from an empty answer.
    answer = models.TextField(null=True, blank=True,  # noqa: DJ001
                              help_text="Extracted final answer; null = none reached.")
    is_correct = models.BooleanField(default=False)
    provenance = models.JSONField(default=dict, blank=True,
                                  help_text="How it was sampled (model, prompt template, temperature, N, tokens).")
    # Set when a labeling round turned this candidate into labeling work: it is never selected again.
    solution = models.OneToOneField("annotate.Solution", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="pool_candidate")

    Meta = position_meta("pool_problem", order_by="pool_problem", constraint="candidate_unique_index")


class ScoringJob(LaunchedJob):
    """A registered model scores every candidate of a pool (and, for a PRM, the held-out labeled steps)."""

    task_name = "jobs.run_scoring_job"
    page_name = "jobs:scoring_job"

    reward_model = models.ForeignKey(RewardModel, on_delete=models.CASCADE, related_name="scoring_jobs")
    pool = models.ForeignKey(CandidatePool, on_delete=models.CASCADE, related_name="scoring_jobs")
    step_metrics = models.JSONField(default=dict, blank=True,
                                    help_text="PRM on held-out labeled solutions: step AUROC, ProcessBench F1.")

    def __str__(self) -> str:
        return f"scoring job {self.pk} ({self.status})"


class SamplingJob(LaunchedJob):
    """A local causal LM samples N solutions per problem of a campaign (``python -m rewards.sampling sample``
    through the launch backends); on success the samples become the campaign's candidate pool."""

    task_name = "jobs.run_sampling_job"
    page_name = "jobs:sampling_job"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="sampling_jobs")
    config = models.JSONField(default=dict, help_text="Sampling keys as given (model, n, temperature, …).")
    problem_count = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True, help_text="The sampler's counts and tokens/s.")
    pool = models.OneToOneField(CandidatePool, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="sampling_job")

    def __str__(self) -> str:
        return f"sampling job {self.pk} ({self.status})"


class LabelingMethod(models.TextChoices):
    MC = "mc", "Monte-Carlo rollouts (sampled continuations, graded)"
    PRM = "prm", "A registered PRM's step scores"


class MachineLabelingJob(LaunchedJob):
    """Machine step labels for chosen solutions of a campaign: Monte-Carlo rollouts from each step prefix
    (``python -m rewards.sampling rollouts``) or a registered PRM's step scores (``python -m rewards.training
    score``), through the launch backends; on success they are recorded as the source ``mc:<model>`` or
    ``prm:<model name>`` beside the human ratings (``annotate.services.machine_labels``)."""

    task_name = "jobs.run_machine_labeling_job"
    page_name = "jobs:machine-labels_job"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="machine_labeling_jobs")
    method = models.CharField(max_length=8, choices=LabelingMethod.choices)
    reward_model = models.ForeignKey(RewardModel, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="machine_labeling_jobs", help_text="The PRM, for method prm.")
    config = models.JSONField(default=dict, help_text="Settings as given (rollouts, strategy, model, …).")
    solution_count = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True, help_text="Rollouts and tokens used, steps labeled.")
    labels_recorded = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"machine labeling job {self.pk} ({self.method}, {self.status})"


class CandidateScore(models.Model):
    scoring_job = models.ForeignKey(ScoringJob, on_delete=models.CASCADE, related_name="scores")
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="scores")
    score = models.FloatField(help_text="PRM: product of step P(correct); ORM: P(final answer correct).")
    score_min = models.FloatField(null=True, blank=True, help_text="PRM: min of step P(correct).")
    step_scores = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scoring_job", "candidate"], name="candidatescore_unique")]

    def __str__(self) -> str:
        return f"score {self.score:.3f} of candidate {self.candidate_id}"


class EvaluationRun(Recorded):
    """Best-of-N figures for one pool from a PRM and an ORM scoring, computed with rewards.evaluation."""

    campaign = models.ForeignKey(Campaign, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="evaluation_runs")
    pool = models.ForeignKey(CandidatePool, on_delete=models.CASCADE, related_name="evaluation_runs")
    prm_scoring = models.ForeignKey(ScoringJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    orm_scoring = models.ForeignKey(ScoringJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    aggregation = models.CharField(max_length=8, default="product", help_text="PRM solution score: product or min.")
    trials = models.PositiveIntegerField(default=400)
    seed = models.IntegerField(default=0)
    results = models.JSONField(default=dict, help_text="rewards.evaluation.best_of_n document.")
    step_metrics = models.JSONField(default=dict, blank=True)
    data_efficiency = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"evaluation {self.pk} on {self.pool}"


class LabelingRound(NumberedPerCampaign):
    """One round of active learning: the current PRM scores the unlabeled pool, a strategy picks a batch,
    the batch becomes the campaign's labeling work of generation ``number`` (the ``Solution.generation`` it
    writes, the PRM800K field).

    At most one round per campaign is scoring at a time (partial unique constraint), so two
    triggers (button, API, periodic task) cannot choose from the same pool at once.
    """

    class Status(models.TextChoices):
        """A round's own states, not the job layer's: its work is its scoring job (docs/architecture.md)."""

        SCORING = "scoring", "Scoring the pool"
        COMPLETED = "completed", "Selected: labeling work created"
        FAILED = "failed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="labeling_rounds")
    number = models.IntegerField(help_text="g: Solution.generation of the work it created.")
    pool = models.ForeignKey(CandidatePool, on_delete=models.PROTECT, related_name="labeling_rounds")
    strategy = models.CharField(max_length=32)
    strategy_config = models.JSONField(default=dict, blank=True, help_text="Validated options, defaults filled in.")
    reward_model = models.ForeignKey(RewardModel, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="labeling_rounds")
    dataset_version = models.ForeignKey("rewards.DatasetVersion", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+", help_text="The version the reward model was trained on.")
    scoring_job = models.OneToOneField(ScoringJob, null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="labeling_round")
    batch_size = models.PositiveIntegerField()
    selected_count = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SCORING)
    error = models.TextField(blank=True)
    auto_started = models.BooleanField(default=False, help_text="Started by the periodic task.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta(NumberedPerCampaign.Meta):
        constraints = [
            *NumberedPerCampaign.Meta.constraints,
            models.UniqueConstraint(fields=["campaign"], condition=Q(status="scoring"),
                                    name="labelinground_one_scoring_per_campaign"),
        ]

    def __str__(self) -> str:
        return f"labeling round {self.number} of {self.campaign_id} ({self.status})"


class ComparisonRun(Job):
    """One click of "Compare PRM and ORM": snapshot → train PRM + ORM (same backbone, same budget) → score the
    campaign's pool with both → evaluate. The jobs it starts are ordinary training/scoring jobs with their own
    pages; this row only records the chain, where it stands (``stage``) and, on failure, the stage at fault
    (``error``, in one sentence)."""

    class Stage(models.TextChoices):
        """The chain's stages in the order a run goes through them; ``status`` says whether it is still moving."""

        SNAPSHOT = "snapshot", "Snapshot the labels"
        TRAIN = "train", "Train a PRM and an ORM"
        SCORE = "score", "Score the pool with both"
        EVALUATE = "evaluate", "Evaluate best-of-N"
        DONE = "done"

    task_name = "jobs.advance_comparison"
    holds_worker = False  # its task moves the chain on and returns; the jobs it starts hold the workers

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="comparison_runs")
    stage = models.CharField(max_length=16, choices=Stage.choices, default=Stage.SNAPSHOT)
    max_steps = models.PositiveIntegerField(help_text="Optimizer steps per model (the budget).")
    per_problem = models.PositiveIntegerField(default=0, help_text="Candidates scored per problem: the first k "
                                                                   "of each (0 = all), so N runs up to k.")
    base_model = models.CharField(max_length=200, default="default")
    source_pool = models.ForeignKey(CandidatePool, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+", help_text="The campaign's pool the candidates come from.")
    pool = models.ForeignKey(CandidatePool, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                             help_text="What was scored: the source pool, or its first k candidates per problem.")
    dataset_version = models.ForeignKey("rewards.DatasetVersion", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    new_version = models.BooleanField(default=False, help_text="The snapshot made a new version (labels changed).")
    prm_job = models.ForeignKey(TrainingJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    orm_job = models.ForeignKey(TrainingJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    prm_scoring = models.ForeignKey(ScoringJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    orm_scoring = models.ForeignKey(ScoringJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    evaluation = models.ForeignKey(EvaluationRun, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    cancel_requested = models.BooleanField(default=False)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta(Job.Meta):
        constraints = [
            # one run at a time per campaign: two clicks do not train four models on the same labels
            models.UniqueConstraint(fields=["campaign"], condition=Q(status__in=["queued", "running"]),
                                    name="comparisonrun_one_active_per_campaign"),
        ]

    def task_queue(self) -> str:
        return "default"

    def __str__(self) -> str:
        return f"comparison {self.pk} of {self.campaign_id} ({self.status}, {self.stage})"


class LlmJudgeJob(LaunchedJob):
    """An LLM judge's machine labels for chosen solutions of a campaign: each solution is sent, in the worker,
    to a served endpoint with a versioned prompt (``rewards.served.judge``) and its verdict is recorded at once
    as the source ``llm:<model>@<template version>``. A stop (cancel, a spent token budget, a server gone) keeps
    every finished solution; resuming the job judges only the rest."""

    task_name = "jobs.run_llm_judge_job"
    page_name = "jobs:llm-judge_job"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="llm_judge_jobs")
    endpoint = models.ForeignKey("endpoints.Endpoint", null=True, on_delete=models.SET_NULL,
                                 related_name="llm_judge_jobs")
    source = models.CharField(max_length=200, help_text="The label source's name: <model>@<template version>.")
    template_version = models.CharField(max_length=40)
    max_tokens = models.PositiveIntegerField(default=512)
    solution_ids = models.JSONField(default=list, help_text="The solutions chosen, in the order judged.")
    solution_count = models.PositiveIntegerField(default=0)
    solutions_done = models.PositiveIntegerField(default=0, help_text="Judged, parsable or not (all runs).")
    unparsable = models.JSONField(default=list, blank=True, help_text="[{solution_id, why}] of unreadable answers.")
    token_budget = models.PositiveIntegerField(default=0, help_text="Prompt + completion tokens this job may use.")
    tokens_used = models.PositiveIntegerField(default=0)
    tokens_estimated = models.BooleanField(default=False, help_text="Some answer came without usage.")
    resumable = models.BooleanField(default=False, help_text="It stopped with solutions left to judge.")

    def progress_words(self) -> str:
        return (f"{self.solutions_done} of {self.solution_count} solutions, {self.tokens_used:,} of "
                f"{self.token_budget:,} tokens{' (partly estimated)' if self.tokens_estimated else ''}")

    def __str__(self) -> str:
        return f"LLM judge job {self.pk} ({self.source}, {self.status})"
