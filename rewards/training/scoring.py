"""Scoring solutions with a trained reward model (Python API and the ``score`` command).

Sequences are built by the same ``encode_prm`` / ``encode_orm`` as in training. A solution longer
than the model's ``max_length`` is scored in successive windows (each later window keeps as much
left context as fits), so every step gets a score.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..evaluation.step_metrics import DEFAULT_THRESHOLD, first_error_index
from .data import SequenceLayout, TrainingDataError, encode_orm, encode_prm, iter_records, pad_batch, tokenize_texts
from .figures import aggregate
from .heads.features import orm_steps
from .heads.scorer import HeadScorer
from .modeling import ModelSpec, load_model, load_tokenizer, sequence_layout
from .textfeatures import neutral_answers

Steps = Sequence[str]


class ScoringModel:
    """What every loaded PRM or ORM offers, whatever its method. Scores are P(correct) in (0, 1)."""

    spec: ModelSpec
    kind: str
    aggregation: str

    @property
    def threshold(self) -> float:
        """The PRM's first-error threshold: the calibrated one stored with the model, else 0.5."""
        return DEFAULT_THRESHOLD if self.spec.threshold is None else float(self.spec.threshold)

    def score_steps_batch(self, items: Sequence[tuple[str, Steps]]) -> list[list[float]]:
        raise NotImplementedError

    def score_solutions(self, items: Sequence[tuple[str, Steps | str]]) -> list[float]:
        raise NotImplementedError

    def as_trained(self, text: str) -> str:
        """A step's or a solution's text as the model learned to read it: answer lines in the neutral form, unless
        it was trained on them as written."""
        return neutral_answers(text) if self.spec.answers == "neutral" else text

    def steps_as_trained(self, items: Sequence[tuple[str, Steps]]) -> list[tuple[str, list[str]]]:
        return [(prompt, [self.as_trained(step) for step in steps]) for prompt, steps in items]

    def solutions_as_trained(self, items: Sequence[tuple[str, Steps | str]]) -> list[tuple[str, Steps | str]]:
        """A whole solution is rewritten before it is split into steps, so a ``# Answer`` block stays one line."""
        return [(prompt, self.as_trained(solution) if isinstance(solution, str)
                 else [self.as_trained(step) for step in solution]) for prompt, solution in items]

    def score_steps(self, prompt: str, steps: Steps) -> list[float]:
        """Per-step P(correct) of one solution (PRM only)."""
        return self.score_steps_batch([(prompt, steps)])[0]

    def score_solution(self, prompt: str, solution: Steps | str) -> float:
        """One solution's score (see ``score_solutions``)."""
        return self.score_solutions([(prompt, solution)])[0]


def _check_steps(kind: str, items: Sequence[tuple[str, Steps]]) -> None:
    if kind != "prm":
        raise TypeError("score_steps needs a PRM; this is an ORM (use score_solution)")
    for prompt, steps in items:
        if not steps:
            raise ValueError(f"a solution needs at least one step (prompt {prompt[:40]!r})")


class HeadRewardModel(ScoringModel):
    """A ``head`` model: a small classifier over the frozen backbone's cached features (``heads``)."""

    def __init__(self, folder: Path, spec: ModelSpec) -> None:
        self.spec, self.kind, self.aggregation = spec, spec.kind, spec.aggregation
        self.scorer = HeadScorer(folder, spec)

    def score_steps_batch(self, items: Sequence[tuple[str, Steps]]) -> list[list[float]]:
        _check_steps(self.kind, items)
        return self.scorer.steps(self.steps_as_trained(items))

    def score_solutions(self, items: Sequence[tuple[str, Steps | str]]) -> list[float]:
        pairs = [(prompt, orm_steps(solution) if isinstance(solution, str) else list(solution))
                 for prompt, solution in self.solutions_as_trained(items)]
        if self.kind == "prm":
            return [aggregate(s, self.aggregation) for s in self.score_steps_batch(pairs)]
        return self.scorer.solutions(pairs)


class RewardModel(ScoringModel):
    """A loaded fine-tuned PRM or ORM (token or sequence classifier)."""

    def __init__(self, model: Any, tokenizer: Any, spec: ModelSpec, layout: SequenceLayout, device: str,
                 batch_size: int, max_length: int) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.kind: str = spec.kind
        self.aggregation: str = spec.aggregation
        self.layout = layout
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length

    def _positive_probs(self, sequences: list[list[int]]) -> list[Any]:
        """P(correct) for every sequence (per token for a PRM), batched by length to limit padding."""
        import torch

        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        results: list[Any] = [None] * len(sequences)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                batch = pad_batch([{"input_ids": sequences[i]} for i in chunk], self.layout.pad_id)
                logits = self.model(**{k: v.to(self.device) for k, v in batch.items()}).logits
                probs = torch.softmax(logits.float(), dim=-1)[..., self.spec.positive_class].cpu()
                for row, index in enumerate(chunk):
                    results[index] = probs[row]
        return results

    def score_steps_batch(self, items: Sequence[tuple[str, Steps]]) -> list[list[float]]:
        """Per-step P(correct) for many (prompt, steps) pairs."""
        _check_steps(self.kind, items)
        items = self.steps_as_trained(items)
        prompts = tokenize_texts(self.tokenizer, [prompt for prompt, _ in items])
        flat = tokenize_texts(self.tokenizer, [s for _, steps in items for s in steps])
        sequences: list[list[int]] = []
        where: list[tuple[int, list[int], int]] = []  # (item, label positions, first step)
        cursor = 0
        for item, ((_, steps), prompt_ids) in enumerate(zip(items, prompts, strict=True)):
            step_ids = flat[cursor:cursor + len(steps)]
            cursor += len(steps)
            first = 0
            while first < len(steps):
                encoded = encode_prm(self.layout, prompt_ids, step_ids, None, self.max_length, first_step=first)
                sequences.append(encoded.input_ids)
                where.append((item, encoded.label_positions, first))
                first = encoded.end_step
        scores: list[list[float]] = [[0.0] * len(steps) for _, steps in items]
        for (item, positions, first), probs in zip(where, self._positive_probs(sequences), strict=True):
            for offset, position in enumerate(positions):
                scores[item][first + offset] = float(probs[position])
        return scores

    def score_solutions(self, items: Sequence[tuple[str, Steps | str]]) -> list[float]:
        """Solution scores: the PRM's aggregated step scores, or the ORM's P(final answer correct).

        An ORM takes the full text or a list of steps (joined by newlines, as the exporter does).
        """
        if self.kind == "prm":
            pairs = [(prompt, [solution] if isinstance(solution, str) else solution) for prompt, solution in items]
            return [aggregate(s, self.aggregation) for s in self.score_steps_batch(pairs)]
        items = self.solutions_as_trained(items)
        texts = [solution if isinstance(solution, str) else "\n".join(solution) for _, solution in items]
        prompts = tokenize_texts(self.tokenizer, [prompt for prompt, _ in items])
        sequences = [encode_orm(self.layout, p, c, self.max_length)[0]
                     for p, c in zip(prompts, tokenize_texts(self.tokenizer, texts), strict=True)]
        return [float(p) for p in self._positive_probs(sequences)]


def load_reward_model(folder: str | Path, *, device: str | None = None, batch_size: int = 16,
                      max_length: int | None = None) -> ScoringModel:
    """Load a model folder written by training (GPU when present); ``max_length`` defaults to the training one."""
    import torch


    folder = Path(folder)
    spec = ModelSpec.load(folder)
    if spec.method == "head":
        return HeadRewardModel(folder, spec)
    tokenizer = load_tokenizer(folder)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = load_model(folder, spec.kind).to(device)
    return RewardModel(model, tokenizer, spec, sequence_layout(tokenizer, spec.separator_token), device,
                       batch_size, max_length or spec.max_length)


def _solution_of(where: str, record: dict[str, Any], kind: str) -> tuple[str, Steps | str]:
    prompt = record.get("prompt")
    if not isinstance(prompt, str):
        raise TrainingDataError(f"{where}: field 'prompt' must be a string")
    if kind == "prm":
        steps = record.get("completions")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
            raise TrainingDataError(f"{where}: field 'completions' must be a non-empty list of step texts")
        return prompt, steps
    completion = record.get("completion")
    if not isinstance(completion, str):
        raise TrainingDataError(f"{where}: field 'completion' must be a string")
    return prompt, completion


def score_file(model: ScoringModel, source: Path, out: Path, *, chunk_rows: int = 256) -> int:
    """Score a JSONL/Parquet file of solutions into JSONL; returns the number of rows written.

    PRM rows gain ``step_scores``, ``score`` (the model's aggregation, product by default), ``score_min``,
    ``first_error`` (the first step under the model's calibrated threshold, −1 for none) and ``threshold``;
    ORM rows gain ``score``.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with out.open("w", encoding="utf-8") as handle:
        chunk: list[tuple[dict[str, Any], tuple[str, Steps | str]]] = []

        def flush() -> None:
            nonlocal written
            items = [item for _, item in chunk]
            if model.kind == "prm":
                for (record, _), steps in zip(chunk, model.score_steps_batch(items), strict=True):
                    record.update(step_scores=steps, score=aggregate(steps, model.aggregation),
                                  score_min=aggregate(steps, "min"), threshold=model.threshold,
                                  first_error=first_error_index(steps, model.threshold))
            else:
                for (record, _), score in zip(chunk, model.score_solutions(items), strict=True):
                    record["score"] = score
            for record, _ in chunk:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            written += len(chunk)
            chunk.clear()

        for where, record in iter_records(Path(source)):
            chunk.append((record, _solution_of(where, record, model.kind)))
            if len(chunk) >= chunk_rows:
                flush()
        if chunk:
            flush()
    return written
