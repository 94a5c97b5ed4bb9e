"""One training job, whatever its method: read and split the rows, train with the method (the ``head`` or
fine-tuning), and write ``metrics.json`` (``TrainingMetrics``) and ``events.jsonl``. Only the main process
(rank 0) writes files; any rank records its own crash in the event log."""
from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable

from .checks import sanity_figures
from .config import TrainConfig
from .events import EventLog, rank
from .heads.run import train_head
from .heads.spec import resolved_method
from .metrics import TrainingMetrics
from .rows import TrainingRows, read_training_rows
from .scoring import load_reward_model
from .train import train_finetune

Method = Callable[[TrainConfig, TrainingRows, EventLog], TrainingMetrics]
#: each method trains, saves its model and returns its figures; the pipeline does the rest
METHODS: dict[str, Method] = {"head": train_head, "finetune": train_finetune, "lora": train_finetune}


def run_training(config: TrainConfig) -> TrainingMetrics:
    """Train, evaluate and save; returns what is written to ``metrics.json``."""
    events = EventLog(config.output_dir / "events.jsonl", main=rank() == 0)
    try:
        return _run(config, events)
    except BaseException as exc:
        events.write("error", always=True, rank=rank(), message=f"{type(exc).__name__}: {exc}",
                     traceback=traceback.format_exc())
        raise


def _run(config: TrainConfig, events: EventLog) -> TrainingMetrics:
    started = time.time()
    method = resolved_method(config.method)
    if events.main:
        config.output_dir.mkdir(parents=True, exist_ok=True)
        (config.output_dir / "config.resolved.json").write_text(json.dumps(config.resolved(), indent=2) + "\n",
                                                                encoding="utf-8")
    events.write("start", kind=config.kind, method=method, dataset=str(config.dataset),
                 base_model=str(config.base_model_path), world_size=int(os.environ.get("WORLD_SIZE", "1")),
                 config=config.resolved())
    rows = read_training_rows(config)
    metrics = METHODS[method](config, rows, events)
    if events.main and config.kind == "prm" and rows.validation:
        metrics.sanity = sanity_figures(load_reward_model(config.output_dir), rows.validation_as_written,
                                        seed=config.seed)
        events.write("sanity", checks=metrics.sanity)
    metrics.runtime_s = time.time() - started
    if events.main:
        (config.output_dir / "metrics.json").write_text(metrics.to_json(), encoding="utf-8")
        validation = metrics.validation
        events.write("done", model_dir=str(config.output_dir), train_loss=metrics.train and metrics.train.loss,
                     validation_loss=validation.loss if validation else None,
                     examples_per_s=metrics.train and metrics.train.examples_per_s,
                     tokens_per_s=metrics.train and metrics.train.tokens_per_s, runtime_s=metrics.runtime_s)
    return metrics
