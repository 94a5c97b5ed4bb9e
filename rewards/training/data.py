"""Exported datasets in, token sequences out.

Reads the Steplab exporter's ``trl-stepwise`` (PRM) and ``outcome`` (ORM) files, JSONL or Parquet,
and builds the token sequences. ``encode_prm`` is the single place that lays a solution out
(prompt, then every step followed by the separator token), used by training and scoring alike, so
the two can never drift apart. Nothing here imports torch.
"""
from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..node import JsonLineError, json_lines
from .textfeatures import neutral_answers

IGNORE_INDEX = -100  # label value that the cross-entropy loss skips


class TrainingDataError(ValueError):
    """A bad dataset row; the message names the file, the line (or Parquet row) and the field."""


class TextTokenizer(Protocol):
    """The part of a Hugging Face tokenizer that sequence building needs."""

    def __call__(self, text: list[str], **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class PrmRow:
    """One labeled solution; ``labels`` holds 1, 0 or IGNORE_INDEX (neutral step under "exclude")."""

    prompt: str
    steps: tuple[str, ...]
    labels: tuple[int, ...]
    split: str | None
    problem_id: str | None


@dataclass(frozen=True)
class OrmRow:
    """One solution with its outcome label (1 = final answer correct)."""

    prompt: str
    completion: str
    label: int
    split: str | None
    problem_id: str | None


def iter_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (location, record) pairs; location reads "FILE line N" (JSONL) or "FILE row N" (Parquet)."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        number = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=2048):
            for record in batch.to_pylist():
                number += 1
                yield f"{path} row {number}", record
        return
    with path.open(encoding="utf-8") as handle:
        try:
            for number, record in json_lines(handle):
                where = f"{path} line {number}"
                if not isinstance(record, dict):
                    raise TrainingDataError(f"{where}: a row must be a JSON object")
                yield where, record
        except JsonLineError as exc:
            raise TrainingDataError(f"{path} line {exc.number}: not valid JSON ({exc.error})") from None


def _field(where: str, record: dict[str, Any], name: str) -> Any:
    if name not in record or record[name] is None:
        raise TrainingDataError(f"{where}: field '{name}' is missing")
    return record[name]


def _text(where: str, record: dict[str, Any], name: str) -> str:
    value = _field(where, record, name)
    if not isinstance(value, str):
        raise TrainingDataError(f"{where}: field '{name}' must be a string, got {type(value).__name__}")
    return value


def _meta(where: str, record: dict[str, Any]) -> tuple[str | None, str | None]:
    split = record.get("split")
    if split is not None and split not in ("train", "test"):
        raise TrainingDataError(f"{where}: field 'split' must be 'train' or 'test', got {split!r}")
    problem_id = record.get("problem_id")
    return split, None if problem_id is None else str(problem_id)


#: PRM800K's scale as the node reads it: rating -> positive (True), negative (False) or neutral (None)
PM1_LABELS: Mapping[int, bool | None] = {-1: False, 0: None, 1: True}


def step_labels(ratings: Sequence[int], neutral: str, label_map: Mapping[int, bool | None] = PM1_LABELS
                ) -> tuple[int, ...]:
    """Labels from raw ratings under a neutral policy ("exclude": neutral steps get no loss); ``label_map`` is the
    campaign's scale as plain data (the job config carries it; PRM800K's −1/0/+1 by default)."""
    neutral_label = {"positive": 1, "negative": 0, "exclude": IGNORE_INDEX}[neutral]
    return tuple(neutral_label if label_map[r] is None else int(bool(label_map[r])) for r in ratings)


def parse_prm_record(where: str, record: dict[str, Any], neutral: str,
                     label_map: Mapping[int, bool | None] = PM1_LABELS) -> PrmRow:
    """Validate one ``trl-stepwise`` row; labels are recomputed from ``ratings`` unless neutral is "positive"."""
    prompt = _text(where, record, "prompt")
    steps = _field(where, record, "completions")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
        raise TrainingDataError(f"{where}: field 'completions' must be a non-empty list of step texts")
    ratings = record.get("ratings")
    if ratings is not None and (not isinstance(ratings, list) or len(ratings) != len(steps)
                                or not all(r in label_map and not isinstance(r, bool) for r in ratings)):
        raise TrainingDataError(f"{where}: field 'ratings' must be a list of "
                                f"{'/'.join(map(str, sorted(label_map)))}, one per step ({len(steps)} steps)")
    if neutral != "positive" and ratings is not None:
        labels = step_labels(ratings, neutral, label_map)
    else:
        raw = _field(where, record, "labels")
        if not isinstance(raw, list) or len(raw) != len(steps) or not all(isinstance(v, bool) for v in raw):
            raise TrainingDataError(f"{where}: field 'labels' must be a list of booleans, one per step "
                                    f"({len(steps)} steps)")
        labels = tuple(int(v) for v in raw)
    split, problem_id = _meta(where, record)
    return PrmRow(prompt, tuple(steps), labels, split, problem_id)


def parse_orm_record(where: str, record: dict[str, Any]) -> OrmRow:
    """Validate one ``outcome`` row."""
    prompt = _text(where, record, "prompt")
    completion = _text(where, record, "completion")
    label = _field(where, record, "label")
    if not isinstance(label, bool):
        raise TrainingDataError(f"{where}: field 'label' must be a boolean, got {label!r}")
    split, problem_id = _meta(where, record)
    return OrmRow(prompt, completion, int(label), split, problem_id)


def prefix_digests(prompt: str, steps: Sequence[str]) -> list[str]:
    """SHA-256 of the problem and its first k steps, for k = 0 … len(steps): two rows share entry k exactly when
    they share the problem and those k steps (an ``alternatives`` export's rows share their chosen prefix)."""
    digest = hashlib.sha256(prompt.encode())
    digests = [digest.hexdigest()]
    for step in steps:
        digest.update(b"\x00" + step.encode())
        digests.append(digest.hexdigest())
    return digests


def read_dataset(path: Path, kind: str, neutral: str = "positive",
                 label_map: Mapping[int, bool | None] | None = None) -> list[PrmRow] | list[OrmRow]:
    """All rows of an exported file, validated; the first bad row raises TrainingDataError."""
    if kind == "prm":
        return [parse_prm_record(where, record, neutral, label_map or PM1_LABELS)
                for where, record in iter_records(path)]
    return [parse_orm_record(where, record) for where, record in iter_records(path)]


def without_problems(rows: Sequence[Any], problems: Collection[str]) -> tuple[list[Any], int]:
    """The rows whose ``problem_id`` is not among ``problems``, and how many were left out."""
    if not problems:
        return list(rows), 0
    excluded = set(problems)
    kept = [row for row in rows if row.problem_id not in excluded]
    return kept, len(rows) - len(kept)


def with_neutral_answers(rows: Sequence[Any]) -> list[Any]:
    """The rows with every answer line in the neutral form (``textfeatures.neutral_answers``): a PRM row's steps,
    an ORM row's whole solution (before it is split back into steps, so a ``# Answer`` block stays one line)."""

    return [replace(row, steps=tuple(neutral_answers(step) for step in row.steps)) if isinstance(row, PrmRow)
            else replace(row, completion=neutral_answers(row.completion)) for row in rows]


def rows_outside(path: Path, problems: Collection[str]) -> int:
    """How many rows of an exported file are not on ``problems`` (a file with no ``problem_id`` column: all)."""
    excluded = set(problems)
    return sum(1 for _, record in iter_records(path) if str(record.get("problem_id")) not in excluded)


def _held_out(key: str, seed: int, fraction: float) -> bool:
    value = int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:12], 16) / float(16**12)
    return value < fraction


def split_rows(rows: Sequence[Any], eval_fraction: float | None, seed: int) -> tuple[list[Any], list[Any]]:
    """(train, eval): the dataset's ``split`` column, or, with ``eval_fraction``, a seeded split by problem.

    Splitting by problem (``problem_id``, else the prompt) keeps a problem's solutions on one side,
    so validation figures are not inflated by near-duplicate solutions.
    """
    if eval_fraction is None:
        return [r for r in rows if r.split != "test"], [r for r in rows if r.split == "test"]
    train: list[Any] = []
    held: list[Any] = []
    for row in rows:
        (held if _held_out(row.problem_id or row.prompt, seed, eval_fraction) else train).append(row)
    return train, held


@dataclass(frozen=True)
class SequenceLayout:
    """How a tokenizer frames a sequence: its leading special tokens and the step separator."""

    prefix_ids: tuple[int, ...]
    separator_id: int
    pad_id: int


@dataclass(frozen=True)
class Encoded:
    """One token sequence. Steps ``first_step..end_step-1`` are labeled at ``label_positions``."""

    input_ids: list[int]
    labels: list[int]
    label_positions: list[int]
    first_step: int
    end_step: int
    overlong: bool


def tokenize_texts(tokenizer: TextTokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids without special tokens; a literal "[SEP]" typed in a step stays plain text."""
    if not texts:
        return []
    # verbose=False: over-long texts are expected here, encode_prm/encode_orm cut them explicitly
    return list(tokenizer(texts, add_special_tokens=False, split_special_tokens=True, verbose=False)["input_ids"])


#: the most of a window's room that the context before its first target (prompt, earlier steps) may take
CONTEXT_SHARE = 0.5


def _tail(tokens: list[int], keep: int) -> list[int]:
    return tokens[len(tokens) - keep:] if keep < len(tokens) else tokens


def encode_prm(layout: SequenceLayout, prompt_ids: list[int], step_ids: Sequence[list[int]],
               step_labels: Sequence[int] | None, max_length: int, first_step: int = 0) -> Encoded:
    """Lay out ``prefix, prompt, SEP, step_0, SEP, ..., step_k, SEP`` within ``max_length`` tokens.

    Steps from ``first_step`` on are targets: each one's separator carries its label (or, when
    scoring, is where its score is read). Everything else is context with label IGNORE_INDEX.
    When the sequence is too long, the context (the prompt and the steps before ``first_step``)
    keeps its last ``CONTEXT_SHARE`` of the room at most, cut from the left, and whole target
    steps are left off from the end (``end_step`` tells how many fit; scoring continues from there
    in a new window). The context's cut is decided before the targets are placed, so what a step's
    separator can attend to never depends on the steps after it: cut to make room for them, a long
    prompt would tell a causal PRM how much solution is still to come. A single step longer than
    the room keeps its tail, so its label position always survives. Nothing is dropped without
    ``overlong`` saying so.
    """
    sep = layout.separator_id
    room = max_length - len(layout.prefix_ids)
    context = list(prompt_ids) + [sep]
    for index in range(first_step):
        context += step_ids[index] + [sep]
    kept = _tail(context, int(room * CONTEXT_SHARE))
    room_for_targets = room - len(kept)
    targets: list[int] = []
    ends: list[int] = []  # offset of each target's separator inside ``targets``
    end = first_step
    for index in range(first_step, len(step_ids)):
        if len(targets) + len(step_ids[index]) + 1 > room_for_targets:
            break
        targets += step_ids[index] + [sep]
        ends.append(len(targets) - 1)
        end = index + 1
    cut_step = False
    if end == first_step:  # the first target alone does not fit: keep its tail
        targets = _tail(step_ids[first_step], room_for_targets - 1) + [sep]
        ends, end, cut_step = [len(targets) - 1], first_step + 1, True
    offset = len(layout.prefix_ids) + len(kept)
    input_ids = list(layout.prefix_ids) + kept + targets
    labels = [IGNORE_INDEX] * len(input_ids)
    positions = [offset + e for e in ends]
    if step_labels is not None:
        for position, step in zip(positions, range(first_step, end), strict=True):
            labels[position] = int(step_labels[step])
    overlong = cut_step or len(kept) < len(context) or end < len(step_ids)
    return Encoded(input_ids, labels, positions, first_step, end, overlong)


def encode_orm(layout: SequenceLayout, prompt_ids: list[int], completion_ids: list[int],
               max_length: int) -> tuple[list[int], bool]:
    """``prefix, prompt, SEP, solution, SEP``, cut from the left when too long (the final answer is at the end)."""
    body = list(prompt_ids) + [layout.separator_id] + list(completion_ids) + [layout.separator_id]
    kept = _tail(body, max_length - len(layout.prefix_ids))
    return list(layout.prefix_ids) + kept, len(kept) < len(body)


def pad_batch(features: Sequence[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    """Right-pad ``input_ids`` (and per-token ``labels``) into tensors, with an attention mask."""
    import torch

    width = max(len(f["input_ids"]) for f in features)
    input_ids = torch.full((len(features), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(features), width), dtype=torch.long)
    for row, feature in enumerate(features):
        length = len(feature["input_ids"])
        input_ids[row, :length] = torch.tensor(feature["input_ids"], dtype=torch.long)
        attention[row, :length] = 1
    batch: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention}
    if "labels" in features[0]:
        if isinstance(features[0]["labels"], list):
            labels = torch.full((len(features), width), IGNORE_INDEX, dtype=torch.long)
            for row, feature in enumerate(features):
                labels[row, :len(feature["labels"])] = torch.tensor(feature["labels"], dtype=torch.long)
        else:
            labels = torch.tensor([f["labels"] for f in features], dtype=torch.long)
        batch["labels"] = labels
    return batch


@dataclass(frozen=True)
class RewardCollator:
    """Trainer data collator: pads a list of encoded examples into a batch."""

    pad_id: int

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        return pad_batch(features, self.pad_id)
