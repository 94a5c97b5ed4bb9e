"""Typed reads the job pages render: what ``selectors`` return and templates read, so no page digs into stored JSON.

``training_metrics`` parses a job's or a model's stored ``metrics.json`` with the trainer's own ``TrainingMetrics``
(older files lack keys: they read as unset); ``TrainingReport`` is a training job as its pages show it;
``EvaluationResults`` parses an evaluation's stored ``results`` (older runs lack keys: they read as empty);
``Dashboard`` is the PRM-vs-ORM figures (its rows are also the CSV/JSON downloads); ``DashboardPage`` everything the
dashboard template shows; ``SanityReading`` one artefact check of a trained PRM, with its plain-words reading.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from annotate.models import Campaign
from rewards.evaluation.intervals import threshold_verdict
from rewards.training.metrics import TrainingMetrics

from .models import CandidatePool, ComparisonRun, EvaluationRun, RewardModel, ScoringJob, TrainingJob

Row = dict[str, Any]
#: the download names of the dashboard's figures, in the page's order
FIGURES = ("best-of-n", "per-domain", "step-metrics", "data-efficiency", "history", "generations")


def training_metrics(raw: Mapping[str, Any] | None, kind: str) -> TrainingMetrics | None:
    """Stored metrics, typed; None before the trainer wrote any, or for a file no version of the trainer wrote."""
    if not raw:
        return None
    data = {"kind": kind, "method": "finetune", **raw}  # files from before ``method`` was written are fine-tunes
    try:
        return TrainingMetrics.model_validate(data)
    except ValidationError as error:  # a section an older trainer wrote otherwise is left out, the rest still reads
        broken = {str(problem["loc"][0]) for problem in error.errors() if problem["loc"]} - {"kind", "method"}
    try:
        return TrainingMetrics.model_validate({key: value for key, value in data.items() if key not in broken})
    except ValidationError:
        return None


@dataclass(frozen=True)
class TrainingReport:
    """A training job as its page, its live card and a comparison's stages show it."""

    job: TrainingJob
    metrics: TrainingMetrics | None
    #: the artefact checks in plain words; None when the metrics predate them
    sanity: list[SanityReading] | None

    @classmethod
    def of(cls, job: TrainingJob) -> TrainingReport:
        metrics = training_metrics(job.metrics, job.kind)
        return cls(job, metrics, sanity_readings(metrics.sanity or {}) if metrics is not None else None)

    @property
    def method(self) -> str | None:
        return self.metrics.method if self.metrics is not None else None

    @property
    def counter(self) -> str:
        """What the job's progress counts: a head is fitted once on every label (its optimizer stops when it
        converges, well before the budget), fine-tuning runs its optimizer steps up to the budget."""
        job = self.job
        if self.method != "head":
            return f"step {job.step}" + (f" / {job.total_steps}" if job.total_steps else "")
        if job.status != "succeeded":
            return "fitting on every label" + (f": {job.step} optimizer iterations" if job.step else "")
        train = self.metrics.data.train if self.metrics is not None and self.metrics.data is not None else None
        steps = train.steps if train is not None else None
        examples = (f"{steps} labeled example{'' if steps == 1 else 's'}" if steps is not None
                    else "every labeled example")
        return (f"fitted on {examples} in {job.step} optimizer iterations (it stops when it converges; at most "
                f"{job.total_steps})")

    @property
    def threshold_verdict(self) -> str | None:
        """What the PRM's stored threshold buys over 0.5 on its validation rows, when they did not choose it."""
        validation = self.metrics.validation if self.metrics is not None else None
        return threshold_verdict(validation.intervals) if validation is not None and validation.intervals else None


@dataclass(frozen=True)
class ComparisonProgress:
    """A comparison run with its two trainings as their pages show them."""

    run: ComparisonRun
    prm: TrainingReport | None
    orm: TrainingReport | None

    @classmethod
    def of(cls, run: ComparisonRun) -> ComparisonProgress:
        return cls(run, TrainingReport.of(run.prm_job) if run.prm_job else None,
                   TrainingReport.of(run.orm_job) if run.orm_job else None)


class EvaluationResults(BaseModel):
    """An evaluation's stored results; keys a newer evaluation adds are kept (``extra``), missing ones are empty."""

    model_config = ConfigDict(extra="allow")

    ns: list[int] = Field(default_factory=list)
    problems: int | None = None
    pool_size: int | None = None
    #: method → str(N) → {"mean", "std"}
    methods: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    baselines: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    #: method → str(N) → the closed-form expectation
    exact: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    intervals: dict[str, Any] = Field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("methods", "baselines", "exact", mode="before")
    @classmethod
    def _without_absent(cls, value: Any) -> Any:
        """A method the evaluation had no scoring for is stored as None: it has no figures."""
        return {key: figures for key, figures in value.items() if figures is not None} if isinstance(
            value, Mapping) else value

    @classmethod
    def of(cls, run: EvaluationRun) -> EvaluationResults:
        """The run's results; a key stored in a shape this version does not read is left out, the rest still reads."""
        data = dict(run.results or {})
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            broken = {str(problem["loc"][0]) for problem in error.errors() if problem["loc"]}
        return cls.model_validate({key: value for key, value in data.items() if key not in broken})

    @property
    def largest_n(self) -> str | None:
        """The largest N as the stored keys spell it, or None before any."""
        return str(self.ns[-1]) if self.ns else None

    @property
    def draws(self) -> int | None:
        """How many bootstrap resamples the intervals drew."""
        draws = self.intervals.get("draws")
        return int(draws) if isinstance(draws, int) else None

    @property
    def paired(self) -> dict[str, Any]:
        return dict(self.intervals.get("paired") or {})

    @property
    def method_intervals(self) -> dict[str, Any]:
        return dict(self.intervals.get("methods") or {})

    @property
    def curve(self) -> dict[str, Any]:
        return dict(self.intervals.get("curve") or {})


@dataclass(frozen=True)
class LoopState:
    """The dashboard's step-by-step section: versions, pools, models, scorings, the latest comparison."""

    run: ComparisonRun | None
    versions: list[Any]
    pools: list[CandidatePool]
    labeling_pool: CandidatePool | None
    labeled: bool
    models: list[RewardModel]
    scorings: list[ScoringJob]

    @property
    def comparison(self) -> ComparisonProgress | None:
        return ComparisonProgress.of(self.run) if self.run is not None else None


@dataclass(frozen=True)
class Dashboard:
    """The figures of one campaign's latest evaluation and its PRMs' held-out scorings."""

    latest: EvaluationRun | None
    results: EvaluationResults | None
    figures_campaign: Campaign | None
    verdict: list[str]
    verdict_baseline: str | None
    withheld: list[str]
    curve_falls: list[str]
    no_flag_advice: str | None
    runs: list[Row]
    best_of_n: list[Row]
    per_domain: list[Row]
    step_level: list[Row]
    data_efficiency: list[Row]
    history: list[Row]
    generations: list[Row]

    @property
    def figures(self) -> dict[str, list[Row]]:
        """Each figure's rows under its download name."""
        return dict(zip(FIGURES, (self.best_of_n, self.per_domain, self.step_level, self.data_efficiency,
                                  self.history, self.generations), strict=True))

    @property
    def chart_data(self) -> dict[str, Any]:
        """What the page's charts are drawn from (``json_script``)."""
        return {"figures": self.figures, "runs": self.runs}


@dataclass(frozen=True)
class DashboardPage:
    """Everything the dashboard template reads; ``context`` hands its fields to the template by name."""

    campaign: Campaign | None
    campaigns: Any
    data: Dashboard
    loop: LoopState | None
    can_label: bool
    can_manage: bool
    can_start_labeling_round: bool
    can_start_machine_labeling: bool
    can_manage_endpoints: bool
    strategies: list[str]
    aggregations: tuple[str, ...]
    purposes: list[tuple[str, str]]
    sampling_jobs: list[Any]
    machine_labeling_jobs: list[Any]
    label_sources: list[Row]
    prms: list[RewardModel]
    compare_pools: list[CandidatePool]
    #: the start forms by name (compare, score, evaluate, generation, sampling, machine_labels)
    forms: Mapping[str, Any] = field(default_factory=dict)

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: below these the page reads a check as passed. A score is a probability, a prefix's effect a log-odds; a reader
#: cares about a shift a threshold near 0.5 would feel (0.05), a prefix worth a tenth of a log-odds, a shuffled
#: order the model ranks almost as the original (Spearman 0.8), and a last-step rate 10 points off the data's.
FORMAT_SHIFT = 0.05
PREFIX_SHIFT = 0.1
ORDER_BLIND = 0.8
LAST_STEP_GAP = 0.10


@dataclass(frozen=True)
class SanityReading:
    """One check: its key (``data-sanity``), what it did, the figure, and what the figure says about the model."""

    key: str
    check: str
    figure: str
    reading: str
    flagged: bool
    n: int


class _Check(BaseModel):
    """A check's count; its figures are None (or NaN, as the trainer writes them) when there was nothing to check."""

    model_config = ConfigDict(extra="allow")
    n: int = 0
    #: the fields holding its figures, what it did (``{n}`` its count), and why it may have measured nothing
    FIGURES: ClassVar[tuple[str, ...]]
    CHECK: ClassVar[str]
    MISSING: ClassVar[str]

    def read(self, figures: tuple[float, ...]) -> tuple[str, str, bool]:
        """The figure as shown, what it says about the model, and whether that is a warning."""
        raise NotImplementedError

    def reading(self, key: str) -> SanityReading:
        figures = [getattr(self, name) for name in self.FIGURES]
        measured = tuple(f for f in figures if f is not None and math.isfinite(f))
        check = self.CHECK.format(n=self.n)
        if self.n <= 0 or len(measured) < len(figures):
            return SanityReading(key, check, "–", f"not measured: {self.MISSING}", False, self.n)
        return SanityReading(key, check, *self.read(measured), self.n)


class AnswerRewrite(_Check):
    mean_abs_change: float | None = None

    FIGURES = ("mean_abs_change",)
    CHECK = "answer line rewritten into another format ({n:,} answer steps)"
    MISSING = "no step held an answer line"

    def read(self, figures: tuple[float, ...]) -> tuple[str, str, bool]:
        (change,) = figures
        return (f"{change:.2f}", f"the score moves {change:.2f} when only the answer's format changes: "
                + ("it reads format" if change >= FORMAT_SHIFT else "the answer's format barely matters to it"),
                change >= FORMAT_SHIFT)


class HarmlessPrefix(_Check):
    mean_logit_change: float | None = None

    FIGURES = ("mean_logit_change",)
    CHECK = "“Let's note: ” put before every step ({n:,} steps)"
    MISSING = "no step to prefix"

    def read(self, figures: tuple[float, ...]) -> tuple[str, str, bool]:
        (shift,) = figures
        flagged = abs(shift) >= PREFIX_SHIFT
        return (f"{shift:+.2f}", f"a prefix that says nothing moves a step's log-odds by {shift:+.2f}: "
                + ("it reads wording, not maths" if flagged else "empty wording barely moves it"), flagged)


class Shuffle(_Check):
    spearman: float | None = None

    FIGURES = ("spearman",)
    CHECK = "steps of each solution shuffled ({n:,} steps)"
    MISSING = "no solution had two steps to reorder"

    def read(self, figures: tuple[float, ...]) -> tuple[str, str, bool]:
        (rho,) = figures
        return (f"{rho:.2f}", f"with the steps shuffled each step keeps its score's rank (Spearman {rho:.2f}): "
                + ("it barely reads what came before a step" if rho >= ORDER_BLIND
                   else "what came before a step matters to it"), rho >= ORDER_BLIND)


class LastStepLowest(_Check):
    model_rate: float | None = None
    data_rate: float | None = None

    FIGURES = ("model_rate", "data_rate")
    CHECK = "flawed solutions whose lowest score is on the last step ({n:,} flawed solutions)"
    MISSING = "no flawed solution"

    def read(self, figures: tuple[float, ...]) -> tuple[str, str, bool]:
        model_rate, data_rate = figures
        model, data = 100 * model_rate, 100 * data_rate
        flagged = model_rate - data_rate > LAST_STEP_GAP
        return (f"{model:.1f} % (data {data:.1f} %)",
                f"its lowest score falls on the last step in {model:.1f} % of flawed solutions, where the first "
                f"error is in {data:.1f} %: "
                + ("it marks the answer line, not the error" if flagged else "close to where the errors are"),
                flagged)


class Sanity(BaseModel):
    """A trained PRM's artefact checks (``metrics["sanity"]``); a check the trainer did not run is None."""

    model_config = ConfigDict(extra="allow")

    answer_rewrite: AnswerRewrite | None = None
    harmless_prefix: HarmlessPrefix | None = None
    shuffle: Shuffle | None = None
    last_step_lowest: LastStepLowest | None = None

    def checks(self) -> list[tuple[str, _Check]]:
        """The checks the trainer ran, by key, in the page's order."""
        return [(key, check) for key in ("answer_rewrite", "harmless_prefix", "shuffle", "last_step_lowest")
                if (check := getattr(self, key)) is not None]


def sanity_readings(raw: Mapping[str, Any]) -> list[SanityReading] | None:
    """The checks of a training's ``sanity`` report in plain words; None when there is none (or it is unreadable)."""
    if not raw:
        return None
    try:
        sanity = Sanity.model_validate(raw)
    except ValidationError:
        return None
    return [check.reading(key) for key, check in sanity.checks()]
