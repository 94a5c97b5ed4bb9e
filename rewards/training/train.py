"""One training job: exported dataset + config in; model, ``metrics.json`` and ``events.jsonl`` out.

Built on ``transformers.Trainer`` so that data parallelism under ``torchrun`` / ``accelerate launch``,
gradient accumulation, bf16 autocast and gradient checkpointing come from one tested loop. Only the
main process (rank 0) writes files; any rank records its own crash in the event log.
"""
from __future__ import annotations

import json
import os
import random
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import TrainConfig, TrainingConfigError
from .data import (
    IGNORE_INDEX,
    OrmRow,
    PrmRow,
    RewardCollator,
    SequenceLayout,
    encode_orm,
    encode_prm,
    prefix_digests,
    read_dataset,
    split_rows,
    tokenize_texts,
    with_neutral_answers,
    without_problems,
)
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
from .scoring import aggregate


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


class EventLog:
    """Append-only JSON-lines progress log, flushed per event so a web process can tail it."""

    def __init__(self, path: Path, *, main: bool) -> None:
        self.path = path
        self.main = main
        self.started = time.time()
        path.parent.mkdir(parents=True, exist_ok=True)
        if main:
            path.write_text("", encoding="utf-8")

    def write(self, event: str, *, always: bool = False, **fields: Any) -> None:
        """Record an event (main process only, unless ``always``: errors come from every rank)."""
        if not (self.main or always):
            return
        now = time.time()
        record = {"event": event, "time": round(now, 3), "elapsed_s": round(now - self.started, 3), **fields}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
            handle.flush()


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


def dedupe_step_labels(rows: Sequence[PrmRow]) -> tuple[list[PrmRow], int]:
    """Rows whose step labels seen before (same prompt, same steps up to and including it, same label) are set
    to IGNORE_INDEX, and how many were. An ``alternatives`` export repeats each chosen prefix in every row of
    its alternatives; trained as is, those prefix labels would outweigh the alternatives many times over."""
    import dataclasses

    seen: set[tuple[str, int]] = set()
    out: list[PrmRow] = []
    repeated = 0
    for row in rows:
        prefixes = prefix_digests(row.prompt, row.steps)
        labels = list(row.labels)
        for index, label in enumerate(row.labels):
            if label == IGNORE_INDEX:
                continue
            key = (prefixes[index + 1], label)  # the steps up to and including this one, and its label
            if key in seen:
                labels[index] = IGNORE_INDEX
                repeated += 1
            else:
                seen.add(key)
        out.append(dataclasses.replace(row, labels=tuple(labels)) if tuple(labels) != row.labels else row)
    return out, repeated


def encode_prm_rows(rows: Sequence[PrmRow], tokenizer: Any, layout: SequenceLayout,
                    max_length: int, *, dedupe: bool = False) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Encoded examples (rows without any labeled step left out) and the counts."""
    repeated = 0
    if dedupe:
        rows, repeated = dedupe_step_labels(rows)
    prompts = tokenize_texts(tokenizer, [r.prompt for r in rows])
    flat = tokenize_texts(tokenizer, [s for r in rows for s in r.steps])
    features: list[dict[str, Any]] = []
    counts = {"rows": len(rows), "rows_used": 0, "steps": 0, "positive_steps": 0, "negative_steps": 0,
              "excluded_steps": 0, "repeated_steps": repeated, "overlong": 0, "dropped_steps": 0}
    cursor = 0
    for row, prompt_ids in zip(rows, prompts, strict=True):
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
        features.append({"input_ids": encoded.input_ids, "labels": encoded.labels})
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


def binary_figures(scores: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Accuracy at 0.5 and AUROC (None when only one class is present)."""
    from sklearn.metrics import roc_auc_score

    both = len(np.unique(labels)) == 2
    return {
        "count": int(len(labels)),
        "positive_rate": float(labels.mean()) if len(labels) else None,
        "accuracy": float(((scores >= 0.5) == (labels == 1)).mean()) if len(labels) else None,
        "auroc": float(roc_auc_score(labels, scores)) if both else None,
    }


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


def _first_errors(truths: Sequence[Sequence[int]]) -> list[int]:
    return [next((i for i, v in enumerate(truth) if v == 0), -1) for truth in truths]


def prm_figures(probs: np.ndarray, labels: np.ndarray, aggregation: str,
                calibration: dict[str, Any] | None) -> dict[str, Any]:
    """Step-level figures over labeled separators; solution-level: correct = no negative step; first-error F1 at
    0.5 and, with a ``calibration`` (cross-fitted on the training problems), at its threshold. These rows never
    choose the threshold: they are the reported figures."""
    from ..evaluation.step_metrics import DEFAULT_THRESHOLD, processbench_metrics

    per_row, truths = scored_rows(probs, labels)
    first_errors = _first_errors(truths)

    def f1(threshold: float) -> float | None:
        both = -1 in first_errors and any(index != -1 for index in first_errors)
        return float(processbench_metrics(first_errors, step_scores=per_row, threshold=threshold)["f1"]) \
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
    dealt into ``threshold_folds`` folds (a seeded order; fewer with fewer problems), each fold's rows are scored by
    a model fine-tuned on the other folds' rows, and the threshold is where first-error F1 peaks over all those
    out-of-fold rows. None with fewer than two problems or without both an erroneous and a correct solution."""
    import hashlib

    from ..evaluation.step_metrics import calibrate_threshold

    assert config.threshold_folds is not None
    problem = {id(row): row.problem_id or row.prompt for row in rows}
    problems = sorted(set(problem.values()),
                      key=lambda p: hashlib.sha256(f"calibration:{config.seed}:{p}".encode()).hexdigest())
    count = min(config.threshold_folds, len(problems))
    if count < 2:
        events.write("warning", message="threshold_folds: fewer than two training problems; the threshold is 0.5")
        return None
    fold_of = {name: number % count for number, name in enumerate(problems)}
    per_row: list[list[float]] = []
    truths: list[list[int]] = []
    for fold in range(count):
        inside = [row for row in rows if fold_of[problem[id(row)]] == fold]
        outside = [row for row in rows if fold_of[problem[id(row)]] != fold]
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
    calibration = calibrate_threshold(_first_errors(truths), per_row)
    if calibration["threshold"] is None:
        events.write("warning", message="threshold_folds: the training folds hold no erroneous or no correct "
                                        "solution; the threshold is 0.5")
        return None
    return {**calibration, "folds": count, "problems": len(problems), "rows": len(per_row),
            "source": "training problems, cross-fitted"}


def run_training(config: TrainConfig) -> dict[str, Any]:
    """Train, evaluate and save; returns the metrics written to ``metrics.json``."""
    from .head import resolved_method, run_head_training

    output = config.output_dir
    events = EventLog(output / "events.jsonl", main=_rank() == 0)
    try:
        if resolved_method(config.method) == "head":
            started = time.time()
            output.mkdir(parents=True, exist_ok=True)
            (output / "config.resolved.json").write_text(json.dumps(config.resolved(), indent=2) + "\n",
                                                         encoding="utf-8")
            events.write("start", kind=config.kind, method="head", dataset=str(config.dataset),
                         base_model=str(config.base_model_path), config=config.resolved())
            return run_head_training(config, events, started)
        return _train(config, events)
    except BaseException as exc:
        events.write("error", always=True, rank=_rank(), message=f"{type(exc).__name__}: {exc}",
                     traceback=traceback.format_exc())
        raise


def _train(config: TrainConfig, events: EventLog) -> dict[str, Any]:
    import torch
    from transformers import set_seed

    started = time.time()
    if events.main:
        (config.output_dir / "config.resolved.json").write_text(
            json.dumps(config.resolved(), indent=2) + "\n", encoding="utf-8")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    events.write("start", kind=config.kind, dataset=str(config.dataset), base_model=str(config.base_model_path),
                 world_size=world, cuda=torch.cuda.is_available(), config=config.resolved())
    set_seed(config.seed)

    rows, excluded = without_problems(read_dataset(config.dataset, config.kind, config.neutral, config.label_map),
                                      config.exclude_problems)
    if config.answers == "neutral":
        rows = with_neutral_answers(rows)
    train_rows, eval_rows = split_rows(rows, config.eval_fraction, config.seed)
    if config.limit is not None:
        train_rows = train_rows[:config.limit]
    if config.max_eval_rows is not None and len(eval_rows) > config.max_eval_rows:
        eval_rows = random.Random(config.seed).sample(eval_rows, config.max_eval_rows)
    if not rows:
        raise ValueError(f"{config.dataset}: the {config.kind.upper()} dataset has no rows: nothing to train on")
    if not train_rows:
        where = ("eval_fraction sends every problem to validation" if config.eval_fraction is not None
                 else f"all {len(rows)} rows are in the 'test' split")
        raise ValueError(f"{config.dataset}: no training rows ({where})")

    positions = max_positions(config.base_model_path)
    if positions is not None and config.max_length > positions:
        raise TrainingConfigError(f"config key 'max_length' is {config.max_length}, above the base model's "
                          f"maximum of {positions} positions", key="max_length")
    tokenizer = load_tokenizer(config.base_model_path)
    separator, added = choose_separator(tokenizer)
    layout = sequence_layout(tokenizer, separator)
    if config.kind == "prm":
        train_features, train_counts = encode_prm_rows(train_rows, tokenizer, layout, config.max_length,
                                                       dedupe=config.dedupe_steps)
        eval_features, eval_counts = encode_prm_rows(eval_rows, tokenizer, layout, config.max_length)
    else:
        train_features, train_counts = encode_orm_rows(train_rows, tokenizer, layout, config.max_length)
        eval_features, eval_counts = encode_orm_rows(eval_rows, tokenizer, layout, config.max_length)
    train_counts["excluded_rows"] = excluded
    events.write("data", train=train_counts, eval=eval_counts, separator=separator, separator_added=added,
                 overlong=train_counts["overlong"] + eval_counts["overlong"])
    if not eval_features:
        events.write("warning", message="no validation rows: validation figures will be null")

    negative_weight = _negative_weight(config, train_counts)
    if negative_weight != 1.0:
        events.write("class_weight", negative_weight=negative_weight)
    bf16, checkpointing = _device_flags(config, events)
    global_batch = config.batch_size * config.gradient_accumulation_steps * world
    fit = _Fit(config, tokenizer, layout, added=added, negative_weight=negative_weight, bf16=bf16,
               checkpointing=checkpointing)
    calibration = (crossfit_threshold(config, train_rows, fit, events)
                   if config.kind == "prm" and config.threshold_folds is not None else None)
    model = fit.model()
    trainer = fit.trainer(model, train_features, callbacks=[_event_callback(events, global_batch)])
    result = trainer.train()
    runtime = float(result.metrics["train_runtime"])
    tokens = int(trainer.state.num_input_tokens_seen)
    train_figures = {
        "loss": float(result.training_loss),
        "steps": int(trainer.state.global_step),
        "epochs": float(trainer.state.epoch or 0.0),
        "runtime_s": runtime,
        "examples_per_s": float(result.metrics["train_samples_per_second"]),
        "tokens": tokens,
        "tokens_per_s": tokens / runtime if runtime > 0 else None,
        "global_batch_size": global_batch,
        "negative_weight": negative_weight,
    }

    validation: dict[str, Any] | None = None
    if eval_features:
        prediction = trainer.predict(eval_features, metric_key_prefix="eval")
        probs = np.asarray(prediction.predictions)
        labels = np.asarray(prediction.label_ids)
        validation = {"loss": float(prediction.metrics["eval_loss"]),
                      "runtime_s": float(prediction.metrics["eval_runtime"])}
        if config.kind == "prm":
            validation.update(prm_figures(probs, labels, config.score_aggregation, calibration))
        else:
            validation["solution_level"] = binary_figures(probs.reshape(-1), labels.reshape(-1))
        events.write("eval", step=trainer.state.global_step, **validation)
    elif calibration is not None:  # no validation rows: the threshold still travels
        validation = {"threshold": calibration["threshold"], "calibration": calibration,
                      "threshold_choice": threshold_choice(calibration)}

    parameters = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    metrics = {
        "kind": config.kind,
        "method": "lora" if config.lora is not None else "finetune",
        "train": train_figures,
        "validation": validation,
        "data": {"train": train_counts, "validation": eval_counts,
                 "overlong": train_counts["overlong"] + eval_counts["overlong"]},
        "model": {"parameters": parameters, "trainable_parameters": trainable, "separator_token": separator,
                  "bf16": bf16, "gradient_checkpointing": checkpointing, "lora": config.lora is not None},
        "world_size": world,
        "runtime_s": time.time() - started,
    }
    if trainer.is_world_process_zero():
        spec = ModelSpec(kind=config.kind, separator_token=separator, aggregation=config.score_aggregation,
                         neutral=config.neutral, base_model=config.base_model, max_length=config.max_length,
                         lora=config.lora is not None, answers=config.answers,
                         threshold=(validation or {}).get("threshold") if config.kind == "prm" else None)
        save_reward_model(model, tokenizer, spec, config.output_dir)
        metrics["runtime_s"] = time.time() - started
        (config.output_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
        events.write("done", model_dir=str(config.output_dir), train_loss=train_figures["loss"],
                     validation_loss=validation["loss"] if validation else None,
                     examples_per_s=train_figures["examples_per_s"], tokens_per_s=train_figures["tokens_per_s"],
                     runtime_s=metrics["runtime_s"])
    return metrics
