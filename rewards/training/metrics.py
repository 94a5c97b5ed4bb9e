"""``metrics.json``, typed: what a training job (head or fine-tune) reports, and what the web side reads back.

Field names are the file's keys. A field is written only when the trainer set it (``exclude_unset``), so each
method's file keeps its own keys in their order; a key the method sets to nothing is written as ``null``. Every
field but ``kind`` and ``method`` has a default, so a file written before a key existed still reads.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict


class _Figures(BaseModel):
    model_config = ConfigDict(extra="ignore")


class BinaryFigures(_Figures):
    """Accuracy at 0.5 and AUROC of scores against binary labels (``auroc`` None with one class only)."""

    count: int = 0
    positive_rate: float | None = None
    accuracy: float | None = None
    auroc: float | None = None


class DistinctStepFigures(_Figures):
    """Step AUROC with each distinct (problem, prefix, step) counted once: an ``alternatives`` export repeats each
    chosen prefix in every alternative's row, which the plain step figures count once per row."""

    count: int = 0
    auroc: float | None = None


class SiblingPairFigures(_Figures):
    """Share of sibling pairs (same problem and prefix, one acceptable step and one wrong) ordered right."""

    accuracy: float | None = None
    pairs: int = 0
    contexts: int = 0


class Calibration(_Figures):
    """How the first-error threshold was chosen: cross-fitted over training problems (every field), or on the
    validation split (``source`` only)."""

    threshold: float | None = None
    f1_calibrated: float | None = None
    f1_at_default: float | None = None
    folds: int | None = None
    problems: int | None = None
    rows: int | None = None
    source: str | None = None


class TrainFigures(_Figures):
    loss: float | None = None
    steps: int | None = None
    epochs: float | None = None
    runtime_s: float | None = None
    examples_per_s: float | None = None
    tokens: int | None = None
    tokens_per_s: float | None = None
    global_batch_size: int | None = None
    negative_weight: float | str | None = None  # a weight, or "balanced" (the head's, as configured)
    features_s: float | None = None
    sibling_pairs: int | None = None
    trees: int | None = None
    calibration_s: float | None = None
    regularisation: float | None = None  # the head's inverse L2 strength, chosen on the training problems
    tuning: dict[str, Any] | None = None  # how: ``rewards.training.heads.tuning``'s candidates and their AUROCs
    tuning_s: float | None = None


class Validation(_Figures):
    """Figures on the validation rows (which choose nothing); ``threshold`` and ``calibration`` also travel
    without validation rows."""

    loss: float | None = None
    runtime_s: float | None = None
    step_level: BinaryFigures | None = None
    solution_level: BinaryFigures | None = None
    threshold: float | None = None
    calibration: Calibration | None = None
    threshold_choice: str | None = None
    intervals: dict[str, Any] | None = None  # ``rewards.evaluation.intervals.step_level_intervals``
    f1_calibrated: float | None = None
    f1_at_default: float | None = None
    step_level_distinct: DistinctStepFigures | None = None
    sibling_pair_accuracy: SiblingPairFigures | None = None


class DataCounts(_Figures):
    """Rows and labels read (PRM: steps; ORM: solutions)."""

    rows: int = 0
    rows_used: int = 0
    steps: int | None = None
    positive_steps: int | None = None
    negative_steps: int | None = None
    positive: int | None = None
    negative: int | None = None
    excluded_steps: int | None = None
    repeated_steps: int | None = None
    overlong: int | None = None
    dropped_steps: int | None = None
    excluded_rows: int | None = None


class FeatureCounts(_Figures):
    texts: int = 0
    computed: int = 0
    cache: str | None = None


class DataFigures(_Figures):
    train: DataCounts | None = None
    validation: DataCounts | None = None
    overlong: int = 0
    features: FeatureCounts | None = None


class ModelFigures(_Figures):
    parameters: int | None = None
    trainable_parameters: int | None = None
    separator_token: str | None = None
    bf16: bool | None = None
    gradient_checkpointing: bool | None = None
    method: str | None = None
    features: str | None = None
    head: str | None = None
    backbone: str | None = None
    lora: bool | None = None


class TrainingMetrics(_Figures):
    """The whole of ``metrics.json``."""

    kind: str
    method: str
    train: TrainFigures | None = None
    validation: Validation | None = None
    data: DataFigures | None = None
    model: ModelFigures | None = None
    world_size: int = 1
    runtime_s: float | None = None
    sanity: dict[str, dict[str, float | int | None]] | None = None  # ``rewards.evaluation.sanity``'s report

    def as_dict(self) -> dict[str, Any]:
        """The keys the trainer set, in the order the file has them."""
        return self.model_dump(mode="json", exclude_unset=True)

    def to_json(self) -> str:
        """``metrics.json``'s text."""
        return json.dumps(self.as_dict(), indent=2) + "\n"
