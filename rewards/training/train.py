"""The fine-tuning method (``finetune``, ``lora``): a token (PRM) or sequence (ORM) classifier trained on the
backbone, every weight or a LoRA adapter.

Built on ``transformers.Trainer`` so that data parallelism under ``torchrun`` / ``accelerate launch``,
gradient accumulation, bf16 autocast and gradient checkpointing come from one tested loop.
"""
from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..evaluation.step_metrics import DEFAULT_THRESHOLD, processbench_metrics
from .config import TrainConfig, TrainingConfigError
from .data import IGNORE_INDEX, OrmRow, PrmRow, RewardCollator, SequenceLayout, encode_orm, encode_prm, tokenize_texts
from .events import EventLog
from .figures import aggregate, binary_figures, crossfit_calibration, first_errors, in_context_figures, problem_folds
from .metrics import TrainingMetrics
from .modeling import (
    POSITIVE_CLASS,
    ModelSpec,
    build_model,
    choose_separator,
    load_tokenizer,
    max_positions,
    save_reward_model,
    sequence_layout,
)
from .rows import TrainingRows, dedupe_step_labels


def _event_callback(events: EventLog, global_batch: int) -> Any:
    from transformers import TrainerCallback

    class EventCallback(TrainerCallback):
        """Turns Trainer logs into ``log`` events with throughput since the previous one."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.last = (time.time(), state.global_step, state.num_input_tokens_seen)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            if not logs or "loss" not in logs:
                return
            now = time.time()
            then, step, tokens = self.last
            span = max(now - then, 1e-9)
            events.write("log", step=state.global_step, loss=logs["loss"], learning_rate=logs.get("learning_rate"),
                         grad_norm=logs.get("grad_norm"), epoch=state.epoch,
                         examples_per_s=round((state.global_step - step) * global_batch / span, 3),
                         tokens_per_s=round((state.num_input_tokens_seen - tokens) / span, 1))
            self.last = (now, state.global_step, state.num_input_tokens_seen)

    return EventCallback()


def encode_prm_rows(rows: Sequence[PrmRow], tokenizer: Any, layout: SequenceLayout,
                    max_length: int, *, dedupe: bool = False) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Encoded examples (rows without any labeled step left out) and the counts. Each example also names its
    row (``row``, an index into ``rows``) and how many of its steps fit (``end_step``); the collator reads
    neither."""
    repeated = 0
    if dedupe:
        rows, repeated = dedupe_step_labels(rows)
    prompts = tokenize_texts(tokenizer, [r.prompt for r in rows])
    flat = tokenize_texts(tokenizer, [s for r in rows for s in r.steps])
    features: list[dict[str, Any]] = []
    counts = {"rows": len(rows), "rows_used": 0, "steps": 0, "positive_steps": 0, "negative_steps": 0,
              "excluded_steps": 0, "repeated_steps": repeated, "overlong": 0, "dropped_steps": 0}
    cursor = 0
    for number, (row, prompt_ids) in enumerate(zip(rows, prompts, strict=True)):
        steps = flat[cursor:cursor + len(row.steps)]
        cursor += len(row.steps)
        encoded = encode_prm(layout, prompt_ids, steps, row.labels, max_length)
        counts["overlong"] += encoded.overlong
        counts["dropped_steps"] += len(row.steps) - encoded.end_step
        used = row.labels[:encoded.end_step]
        counts["excluded_steps"] += sum(label == IGNORE_INDEX for label in used)  # repeated ones included
        if all(label == IGNORE_INDEX for label in used):
            continue
        counts["positive_steps"] += sum(label == 1 for label in used)
        counts["negative_steps"] += sum(label == 0 for label in used)
        features.append({"input_ids": encoded.input_ids, "labels": encoded.labels, "row": number,
                         "end_step": encoded.end_step})
    counts["rows_used"] = len(features)
    counts["steps"] = counts["positive_steps"] + counts["negative_steps"]
    return features, counts


def encode_orm_rows(rows: Sequence[OrmRow], tokenizer: Any, layout: SequenceLayout,
                    max_length: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Encoded examples and the counts."""
    prompts = tokenize_texts(tokenizer, [r.prompt for r in rows])
    completions = tokenize_texts(tokenizer, [r.completion for r in rows])
    features = []
    overlong = 0
    for row, prompt_ids, completion_ids in zip(rows, prompts, completions, strict=True):
        input_ids, cut = encode_orm(layout, prompt_ids, completion_ids, max_length)
        overlong += cut
        features.append({"input_ids": input_ids, "labels": row.label})
    positives = sum(r.label for r in rows)
    return features, {"rows": len(rows), "rows_used": len(rows), "positive": positives,
                      "negative": len(rows) - positives, "overlong": overlong}


def scored_rows(probs: np.ndarray, labels: np.ndarray) -> tuple[list[list[float]], list[list[int]]]:
    """Per predicted row with a labeled step: the labeled steps' P(correct) and their labels."""
    scores: list[list[float]] = []
    truths: list[list[int]] = []
    for row_probs, row_labels in zip(probs, labels, strict=True):
        mask = row_labels != IGNORE_INDEX
        if mask.any():
            scores.append([float(p) for p in row_probs[mask]])
            truths.append([int(v) for v in row_labels[mask]])
    return scores, truths


def prm_figures(probs: np.ndarray, labels: np.ndarray, aggregation: str,
                calibration: dict[str, Any] | None) -> dict[str, Any]:
    """Step-level figures over labeled separators; solution-level: correct = no negative step; first-error F1 at
    0.5 and, with a ``calibration`` (cross-fitted on the training problems), at its threshold. These rows never
    choose the threshold: they are the reported figures."""
    per_row, truths = scored_rows(probs, labels)
    errors = first_errors(truths)

    def f1(threshold: float) -> float | None:
        both = -1 in errors and any(index != -1 for index in errors)
        return float(processbench_metrics(errors, step_scores=per_row, threshold=threshold)["f1"]) \
            if both else None

    threshold = calibration["threshold"] if calibration is not None else None
    return {"step_level": binary_figures(np.array([s for row in per_row for s in row]),
                                         np.array([v for truth in truths for v in truth])),
            "solution_level": binary_figures(np.array([aggregate(row, aggregation) for row in per_row]),
                                             np.array([int(all(truth)) for truth in truths])),
            "threshold": threshold, "calibration": calibration, "threshold_choice": threshold_choice(calibration),
            "f1_calibrated": f1(threshold) if threshold is not None else None,
            "f1_at_default": f1(DEFAULT_THRESHOLD)}


def threshold_choice(calibration: dict[str, Any] | None) -> str:
    """Which first-error threshold a fine-tuned PRM stores, and why, in one sentence."""
    if calibration is None:
        return ("0.5: a fine-tuned PRM chooses no threshold on its validation rows, whose figures are reported; "
                "threshold_folds cross-fits one over the training problems")
    if calibration["f1_calibrated"] <= calibration["f1_at_default"]:
        return (f"0.5: the threshold cross-fitted over {calibration['folds']} folds of the training problems did "
                "not beat 0.5 there")
    return (f"{calibration['threshold']:.4g}: cross-fitted over {calibration['folds']} folds of "
            f"{calibration['problems']} training problems, where it beat 0.5")


def _positive_probability(logits: Any, labels: Any) -> Any:
    """Keep only P(correct) from each prediction batch (less memory than full logits)."""
    import torch

    return torch.softmax(logits.float(), dim=-1)[..., POSITIVE_CLASS]


def _device_flags(config: TrainConfig, events: EventLog) -> tuple[bool, bool]:
    """bf16 only where the GPU supports it; gradient checkpointing wherever asked (it also works on CPU)."""
    import torch

    bf16 = config.bf16
    if bf16 and not (torch.cuda.is_available() and torch.cuda.is_bf16_supported()):
        events.write("warning", message="bf16 requested but no bf16-capable GPU is present; training in fp32")
        bf16 = False
    return bf16, config.gradient_checkpointing


def _negative_weight(config: TrainConfig, counts: dict[str, int]) -> float:
    """The loss weight of the negative class; "balanced" evens out the training labels (capped at 100)."""
    if config.negative_weight != "balanced":
        return float(config.negative_weight)
    positives = counts.get("positive_steps", counts.get("positive", 0))
    negatives = counts.get("negative_steps", counts.get("negative", 0))
    return min(positives / negatives, 100.0) if negatives and positives else 1.0


def _trainer_class(negative_weight: float) -> Any:
    """Trainer itself, or one whose cross-entropy weighs the negative class (rare −1 steps, wrong answers)."""
    from transformers import Trainer

    if negative_weight == 1.0:
        return Trainer

    class WeightedTrainer(Trainer):
        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None, **kwargs: Any) -> Any:
            import torch

            labels = inputs.pop("labels")
            outputs = model(**inputs)
            logits = outputs.logits
            weight = torch.ones(logits.shape[-1], device=logits.device, dtype=logits.dtype)
            weight[1 - POSITIVE_CLASS] = negative_weight
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                     weight=weight, ignore_index=IGNORE_INDEX)
            return (loss, outputs) if return_outputs else loss

    return WeightedTrainer


class _Fit:
    """A fresh model and its Trainer, as the job's settings make them: the final fit and each calibration fold's."""

    def __init__(self, config: TrainConfig, tokenizer: Any, layout: SequenceLayout, *, added: bool,
                 negative_weight: float, bf16: bool, checkpointing: bool) -> None:
        self.config, self.tokenizer, self.layout, self.added = config, tokenizer, layout, added
        self.negative_weight, self.bf16, self.checkpointing = negative_weight, bf16, checkpointing

    def model(self) -> Any:
        from transformers import set_seed

        set_seed(self.config.seed)  # every fit starts from the same initialisation and data order
        return build_model(self.config.kind, self.config.base_model_path, self.tokenizer, resize=self.added,
                           lora=self.config.lora)

    def trainer(self, model: Any, features: list[dict[str, Any]], *, callbacks: list[Any]) -> Any:
        import torch
        from transformers import TrainingArguments

        config = self.config
        # passed only when on: the argument is deprecated in transformers 5 but is the name 4.x and 5.x share
        checkpointing_args: dict[str, Any] = (
            {"gradient_checkpointing": True, "gradient_checkpointing_kwargs": {"use_reentrant": False}}
            if self.checkpointing else {})
        args = TrainingArguments(
            output_dir=str(config.output_dir),
            per_device_train_batch_size=config.batch_size,
            per_device_eval_batch_size=config.batch_size * 2,
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            learning_rate=config.learning_rate,
            num_train_epochs=config.epochs,
            max_steps=config.max_steps if config.max_steps is not None else -1,
            logging_steps=config.logging_steps,
            logging_first_step=True,
            seed=config.seed,
            data_seed=config.seed,
            bf16=self.bf16,
            save_strategy="no",
            eval_strategy="no",
            report_to="none",
            remove_unused_columns=False,
            include_num_input_tokens_seen="non_padding",
            ddp_find_unused_parameters=False,
            disable_tqdm=True,
            dataloader_pin_memory=torch.cuda.is_available(),
            **checkpointing_args,
        )
        return _trainer_class(self.negative_weight)(
            model=model, args=args, train_dataset=features, data_collator=RewardCollator(self.layout.pad_id),
            processing_class=self.tokenizer, callbacks=callbacks, preprocess_logits_for_metrics=_positive_probability)


def crossfit_threshold(config: TrainConfig, rows: Sequence[PrmRow], fit: _Fit,
                       events: EventLog) -> dict[str, Any] | None:
    """The first-error threshold chosen on the training problems, as the head chooses its own: the problems are
    dealt into ``threshold_folds`` folds (``problem_folds``), each fold's rows are scored by a model fine-tuned on
    the other folds' rows, and the threshold is where first-error F1 peaks over all those out-of-fold rows. None
    with fewer than two problems or without both an erroneous and a correct solution."""
    assert config.threshold_folds is not None
    fold_of = problem_folds([row.problem_id or row.prompt for row in rows], config.threshold_folds, config.seed)
    if fold_of is None:
        events.write("warning", message="threshold_folds: fewer than two training problems; the threshold is 0.5")
        return None
    per_row: list[list[float]] = []
    truths: list[list[int]] = []
    count = len(set(fold_of.values()))
    for fold in range(count):
        inside = [row for row in rows if fold_of[row.problem_id or row.prompt] == fold]
        outside = [row for row in rows if fold_of[row.problem_id or row.prompt] != fold]
        features, _ = encode_prm_rows(outside, fit.tokenizer, fit.layout, config.max_length,
                                      dedupe=config.dedupe_steps)
        held, _ = encode_prm_rows(inside, fit.tokenizer, fit.layout, config.max_length)
        if not features or not held:
            continue
        trainer = fit.trainer(fit.model(), features, callbacks=[])
        trainer.train()
        prediction = trainer.predict(held, metric_key_prefix="calibration")
        scores, labels = scored_rows(np.asarray(prediction.predictions), np.asarray(prediction.label_ids))
        per_row += scores
        truths += labels
        events.write("calibration", fold=fold + 1, folds=count, rows=len(scores))
        del trainer  # one fold's model at a time on the device
    calibration = crossfit_calibration(per_row, truths, fold_of)
    if calibration is None:
        events.write("warning", message="threshold_folds: the training folds hold no erroneous or no correct "
                                        "solution; the threshold is 0.5")
    return calibration


@dataclass
class _Encoded:
    tokenizer: Any
    layout: SequenceLayout
    separator: str
    added: bool
    train: list[dict[str, Any]]
    validation: list[dict[str, Any]]
    validation_rows: list[Any]
    train_counts: dict[str, int]
    validation_counts: dict[str, int]


def _encode(config: TrainConfig, rows: TrainingRows, events: EventLog) -> _Encoded:
    """The rows as token sequences (validation rows sampled down to ``max_eval_rows``)."""
    positions = max_positions(config.base_model_path)
    if positions is not None and config.max_length > positions:
        raise TrainingConfigError(f"config key 'max_length' is {config.max_length}, above the base model's "
                                  f"maximum of {positions} positions", key="max_length")
    validation = rows.validation
    if config.max_eval_rows is not None and len(validation) > config.max_eval_rows:
        validation = random.Random(config.seed).sample(validation, config.max_eval_rows)
    tokenizer = load_tokenizer(config.base_model_path)
    separator, added = choose_separator(tokenizer)
    layout = sequence_layout(tokenizer, separator)
    if config.kind == "prm":
        train, train_counts = encode_prm_rows(rows.train, tokenizer, layout, config.max_length,
                                              dedupe=config.dedupe_steps)
        held, held_counts = encode_prm_rows(validation, tokenizer, layout, config.max_length)
    else:
        train, train_counts = encode_orm_rows(rows.train, tokenizer, layout, config.max_length)
        held, held_counts = encode_orm_rows(validation, tokenizer, layout, config.max_length)
    train_counts["excluded_rows"] = rows.excluded
    events.write("data", train=train_counts, eval=held_counts, separator=separator, separator_added=added,
                 overlong=train_counts["overlong"] + held_counts["overlong"])
    if not held:
        events.write("warning", message="no validation rows: validation figures will be null")
    return _Encoded(tokenizer, layout, separator, added, train, held, validation, train_counts, held_counts)


def _validation(config: TrainConfig, trainer: Any, encoded: _Encoded,
                calibration: dict[str, Any] | None, events: EventLog) -> dict[str, Any] | None:
    if not encoded.validation:
        if calibration is None:
            return None
        return {"threshold": calibration["threshold"], "calibration": calibration,  # the threshold still travels
                "threshold_choice": threshold_choice(calibration)}
    prediction = trainer.predict(encoded.validation, metric_key_prefix="eval")
    probs, labels = np.asarray(prediction.predictions), np.asarray(prediction.label_ids)
    validation: dict[str, Any] = {"loss": float(prediction.metrics["eval_loss"]),
                                  "runtime_s": float(prediction.metrics["eval_runtime"])}
    if config.kind == "prm":
        validation.update(prm_figures(probs, labels, config.score_aggregation, calibration))
        validation.update(_in_context(encoded, probs, labels))
    else:
        validation["solution_level"] = binary_figures(probs.reshape(-1), labels.reshape(-1))
    events.write("eval", step=trainer.state.global_step, **validation)
    return validation


def _in_context(encoded: _Encoded, probs: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """``in_context_figures`` of the validation rows as far as each was read (an overlong one's later steps
    dropped), their labeled steps' scores taken from the prediction in order."""
    prompts: list[str] = []
    solutions: list[Sequence[str]] = []
    step_scores: list[list[float]] = []
    step_labels: list[Sequence[int]] = []
    for feature, row_probs, row_labels in zip(encoded.validation, probs, labels, strict=True):
        row, end = encoded.validation_rows[feature["row"]], feature["end_step"]
        scored = iter(row_probs[row_labels != IGNORE_INDEX])
        prompts.append(row.prompt)
        solutions.append(row.steps[:end])
        step_labels.append(row.labels[:end])
        step_scores.append([float(next(scored)) if label != IGNORE_INDEX else 0.0 for label in row.labels[:end]])
    return in_context_figures(prompts, solutions, step_scores, step_labels)


def _train_figures(result: Any, trainer: Any, global_batch: int, negative_weight: float) -> dict[str, Any]:
    runtime = float(result.metrics["train_runtime"])
    tokens = int(trainer.state.num_input_tokens_seen)
    return {"loss": float(result.training_loss), "steps": int(trainer.state.global_step),
            "epochs": float(trainer.state.epoch or 0.0), "runtime_s": runtime,
            "examples_per_s": float(result.metrics["train_samples_per_second"]), "tokens": tokens,
            "tokens_per_s": tokens / runtime if runtime > 0 else None, "global_batch_size": global_batch,
            "negative_weight": negative_weight}


def train_finetune(config: TrainConfig, rows: TrainingRows, events: EventLog) -> TrainingMetrics:
    """Fine-tune (every weight, or a LoRA adapter), validate and save; returns ``metrics.json``'s content."""
    from transformers import set_seed

    set_seed(config.seed)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    encoded = _encode(config, rows, events)
    negative_weight = _negative_weight(config, encoded.train_counts)
    if negative_weight != 1.0:
        events.write("class_weight", negative_weight=negative_weight)
    bf16, checkpointing = _device_flags(config, events)
    global_batch = config.batch_size * config.gradient_accumulation_steps * world
    fit = _Fit(config, encoded.tokenizer, encoded.layout, added=encoded.added, negative_weight=negative_weight,
               bf16=bf16, checkpointing=checkpointing)
    calibration = (crossfit_threshold(config, rows.train, fit, events)
                   if config.kind == "prm" and config.threshold_folds is not None else None)
    model = fit.model()
    trainer = fit.trainer(model, encoded.train, callbacks=[_event_callback(events, global_batch)])
    result = trainer.train()
    validation = _validation(config, trainer, encoded, calibration, events)
    if trainer.is_world_process_zero():
        spec = ModelSpec(kind=config.kind, separator_token=encoded.separator, aggregation=config.score_aggregation,
                         neutral=config.neutral, base_model=config.base_model, max_length=config.max_length,
                         lora=config.lora is not None, answers=config.answers,
                         threshold=(validation or {}).get("threshold") if config.kind == "prm" else None)
        save_reward_model(model, encoded.tokenizer, spec, config.output_dir)
    return TrainingMetrics.model_validate({
        "kind": config.kind, "method": "lora" if config.lora is not None else "finetune",
        "train": _train_figures(result, trainer, global_batch, negative_weight),
        "validation": validation,
        "data": {"train": encoded.train_counts, "validation": encoded.validation_counts,
                 "overlong": encoded.train_counts["overlong"] + encoded.validation_counts["overlong"]},
        "model": {"parameters": sum(p.numel() for p in model.parameters()),
                  "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
                  "separator_token": encoded.separator, "bf16": bf16, "gradient_checkpointing": checkpointing,
                  "lora": config.lora is not None},
        "world_size": world, "runtime_s": 0.0,
    })
