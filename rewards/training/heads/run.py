"""The ``head`` method's run: encode (the recipes that read vectors, cached), build the examples, fit, choose the
first-error threshold on the training problems, validate and save."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import TrainConfig
from ..data import PrmRow
from ..events import EventLog
from ..features import FeatureCache
from ..metrics import TrainingMetrics
from ..modeling import ModelSpec
from ..rows import TrainingRows, dedupe_step_labels
from .calibrate import crossfit_threshold
from .features import Examples, orm_examples, prm_examples, step_features, texts_of
from .fit import fit_head
from .persistence import Head, save_head
from .spec import HeadSpec, head_spec
from .tuning import choose_settings
from .validate import orm_validation, prm_validation

ENCODE_EVENT_TEXTS = 2048  # a "features" event every this many texts encoded, and after the last


def _encode(config: TrainConfig, spec: HeadSpec, texts: list[str],
            events: EventLog) -> tuple[FeatureCache | None, float]:
    """The backbone's vectors of every text, for the recipes that read them (None otherwise), and the seconds."""
    if not spec.recipe.reads_vectors:
        return None, 0.0
    cache = FeatureCache(_cache_root(config), config.base_model_path, config.max_length)
    started = time.time()
    reported = [0]

    def progress(done: int, total: int) -> None:
        if done == total or done - reported[0] >= ENCODE_EVENT_TEXTS:
            reported[0] = done
            events.write("features", done=done, total=total)

    cache.ensure(texts, progress)
    seconds = time.time() - started
    events.write("features", computed=cache.computed, texts=len(set(texts)), cache=str(cache.folder),
                 seconds=round(seconds, 1))
    return cache, seconds


def _cache_root(config: TrainConfig) -> Path:
    return config.feature_cache or config.dataset.parent / "features"


@dataclass
class _Training:
    """The examples a head fits on and, for a PRM, every training row (not deduped, each step as the compare
    scores it), over which the threshold is chosen from the examples' out-of-fold scores."""

    examples: Examples
    rows: list[PrmRow]
    counts: dict[str, int]


def _training(config: TrainConfig, spec: HeadSpec, cache: FeatureCache | None, rows: TrainingRows) -> _Training:
    repeated = 0
    scored: list[PrmRow] = []
    row_features: list[np.ndarray] = []
    if config.kind == "prm":
        scored = list(rows.train)
        row_features = [step_features(cache, row.prompt, row.steps, spec.recipe) for row in scored]
        fitted, repeated = dedupe_step_labels(scored) if config.dedupe_steps else (scored, 0)
        examples = prm_examples(fitted, row_features)
    else:
        examples = orm_examples(cache, rows.train, spec.recipe)
    y = examples.y
    if len(np.unique(y)) < 2:
        raise ValueError(f"{config.dataset}: the training labels are all "
                         f"{'correct' if y.size and y[0] else 'incorrect'}: a classifier needs both")
    prm = config.kind == "prm"
    counts = {"rows": len(rows.train), "rows_used": len(rows.train), "steps": int(y.size),
              "positive_steps" if prm else "positive": int(y.sum()),
              "negative_steps" if prm else "negative": int(y.size - y.sum()),
              "repeated_steps": repeated, "overlong": 0, "excluded_rows": rows.excluded}
    return _Training(examples, scored, counts)


def _validation(config: TrainConfig, spec: HeadSpec, head: Head, cache: FeatureCache | None, rows: TrainingRows,
                calibration: dict[str, Any] | None) -> dict[str, Any] | None:
    if rows.validation:
        if config.kind == "orm":
            return orm_validation(head, cache, rows.validation, spec.recipe)
        return prm_validation(head, cache, rows.validation, spec.recipe, config.score_aggregation, calibration)
    if calibration is not None:  # no validation rows: the threshold still travels
        return {"threshold": calibration["threshold"], "calibration": calibration}
    return None


def _save(config: TrainConfig, spec: HeadSpec, head: Head, cache: FeatureCache | None,
          threshold: float | None) -> None:
    save_head(head, config.output_dir)
    ModelSpec(kind=config.kind, separator_token="", aggregation=config.score_aggregation, neutral=config.neutral,
              base_model=str(config.base_model_path), max_length=config.max_length, lora=False, method="head",
              threshold=threshold, features=spec.recipe.value, answers=config.answers,
              feature_cache=str(Path(_cache_root(config)).resolve()) if cache is not None else None
              ).save(config.output_dir)


def train_head(config: TrainConfig, rows: TrainingRows, events: EventLog) -> TrainingMetrics:
    """Read, encode (cached), fit, validate, save; returns ``metrics.json``'s content."""
    spec = head_spec(config.head_features, config.head_model)
    texts = texts_of(list(rows.train) + list(rows.validation))
    cache, encode_s = _encode(config, spec, texts, events)
    training = _training(config, spec, cache, rows)
    events.write("data", train=training.counts, eval={"rows": len(rows.validation)}, overlong=0)
    tuning_started = time.time()
    tuned = choose_settings(spec, training.examples, negative_weight=config.negative_weight,
                            iterations=config.max_steps, seed=config.seed)
    spec, tuning = tuned.spec, tuned.record
    tuning_s = time.time() - tuning_started
    if tuning is not None:
        events.write("tuning", **tuning)
    fit_started = time.time()
    head, fit = fit_head(spec, training.examples, negative_weight=config.negative_weight,
                         iterations=config.max_steps, seed=config.seed)
    fit_s = time.time() - fit_started
    size = int(training.examples.y.size)
    events.write("log", step=fit["iterations"], loss=fit["loss"], learning_rate=None, epoch=1.0,
                 examples_per_s=round(size / max(fit_s, 1e-9), 1))
    calibration_started = time.time()
    calibration = (crossfit_threshold(training.examples, training.rows, tuned.crossfit)
                   if config.kind == "prm" and tuned.crossfit is not None else None)
    calibration_s = time.time() - calibration_started if config.kind == "prm" else 0.0
    validation = _validation(config, spec, head, cache, rows, calibration)
    if validation is not None:
        events.write("eval", step=fit["iterations"], **validation)
    _save(config, spec, head, cache, (validation or {}).get("threshold"))
    return TrainingMetrics.model_validate({
        "kind": config.kind, "method": "head",
        "train": {"loss": fit["loss"], "steps": fit["iterations"], "epochs": 1.0, "runtime_s": fit_s,
                  "examples_per_s": size / max(fit_s, 1e-9), "tokens": 0, "tokens_per_s": None,
                  "global_batch_size": size, "negative_weight": config.negative_weight, "features_s": encode_s,
                  "sibling_pairs": fit.get("sibling_pairs", 0), "trees": fit.get("trees", 0),
                  "calibration_s": calibration_s, "regularisation": spec.regularisation, "tuning": tuning,
                  "tuning_s": tuning_s},
        "validation": validation,
        "data": {"train": training.counts, "validation": {"rows": len(rows.validation),
                                                          "rows_used": len(rows.validation)},
                 "overlong": 0, "features": {"texts": len(set(texts)), "computed": cache.computed if cache else 0,
                                             "cache": str(cache.folder) if cache else None}},
        "model": {"parameters": head.parameters, "trainable_parameters": head.parameters, "method": "head",
                  "features": spec.recipe.value, "head": spec.model.value,
                  "backbone": str(config.base_model_path) if cache is not None else None,  # the one it read
                  "lora": False},
        "world_size": 1, "runtime_s": 0.0,
    })
