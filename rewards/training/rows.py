"""The rows a job trains and validates on, read once for every method."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .config import TrainConfig
from .data import IGNORE_INDEX, PrmRow, prefix_digests, read_dataset, split_rows, with_neutral_answers, without_problems


@dataclasses.dataclass(frozen=True)
class TrainingRows:
    """The job's training and validation rows (PRM or ORM) as the model reads them, the validation rows as
    written (what a scorer is given: a saved model rewrites answer lines itself), and how many rows the
    excluded problems held."""

    train: list[Any]
    validation: list[Any]
    validation_as_written: list[Any]
    excluded: int


def read_training_rows(config: TrainConfig) -> TrainingRows:
    """The dataset without the excluded problems, answer lines in the job's form, split by problem (``limit``
    applied to the training side); a clear error where nothing is left to train on."""
    rows, excluded = without_problems(read_dataset(config.dataset, config.kind, config.neutral, config.label_map),
                                      config.exclude_problems)
    if not rows:
        outside = f" outside the {len(config.exclude_problems)} excluded problems" if excluded else ""
        raise ValueError(f"{config.dataset}: the {config.kind.upper()} dataset has no rows{outside}: "
                         f"nothing to train on")
    train, validation = split_rows(rows, config.eval_fraction, config.seed)  # by problem: answers play no part
    if config.limit is not None:
        train = train[:config.limit]
    if not train:
        where = ("eval_fraction sends every problem to validation" if config.eval_fraction is not None
                 else f"all {len(rows)} rows are in the 'test' split")
        raise ValueError(f"{config.dataset}: no training rows ({where})")
    if config.answers == "neutral":
        return TrainingRows(with_neutral_answers(train), with_neutral_answers(validation), validation, excluded)
    return TrainingRows(train, validation, validation, excluded)


def dedupe_step_labels(rows: Sequence[PrmRow]) -> tuple[list[PrmRow], int]:
    """Rows whose step labels seen before (same prompt, same steps up to and including it, same label) are set
    to IGNORE_INDEX, and how many were. An ``alternatives`` export repeats each chosen prefix in every row of
    its alternatives; trained as is, those prefix labels would outweigh the alternatives many times over."""
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
