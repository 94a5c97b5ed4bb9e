"""The rows of the built-in dataset formats and the writer of every registered one (``rewards.formats``: each
format's declaration, its files and Parquet schema), streamed in constant memory.

* ``prm800k`` — the lossless PRM800K JSONL (``annotate.prm800k``), one row per finished labeling.
* ``trl-stepwise`` — TRL's stepwise-supervision type: ``prompt``, ``completions`` (step texts),
  ``labels`` (bools), plus ``ratings`` (the raw −1/0/+1), ``rationales`` (always present, parallel to
  ``completions``: the labeler's one-line reason for a −1, null where none), ``error_categories`` (likewise: the
  campaign's error category the labeler named on an error step), ``split``, ``problem_id``,
  ``solution_id``.
  Step mode (``steps``): ``chosen`` — one row per labeled solution, the path the labeler continued with;
  ``alternatives`` — that row plus, for every other rated candidate at a position of the path, one row
  made of the chosen prefix up to that position and the candidate (deduplicated by text), so the ratings
  conversational (phase-1) labelers gave to the completions they did not continue with reach training;
  ``auto`` (default) — ``alternatives`` when the labeled rows carry rated alternatives (a conversational
  campaign, or any rating on a completion other than the first), else ``chosen``. Steps after the first
  error are dropped. Neutral policy
  (``neutral``): ``positive`` (the paper's choice: 0 counts as correct), ``negative``, or ``exclude``
  (neutral steps are left out of ``completions``/``labels``). A human-written step (conversational
  mode) counts as +1: the labeler wrote it as a correct continuation.
* ``outcome`` — for ORMs: ``prompt``, ``completion`` (the whole solution, steps joined by newlines),
  ``label`` (final answer correct per the grader), ``split``, ``problem_id``, ``source``, ``solution_id``,
  ``candidate_id``; one row per graded solution of the campaign, labeled or not, and per graded pool candidate
  (``rewards.formats.outcome``).

The train/test split is by problem and deterministic: a problem is in ``test`` when
SHA-256(seed, problem text digest) falls under ``test_fraction``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
from django.db.models import QuerySet

from annotate import models
from annotate.prm800k.export import ChunkData, LabelerNames, iter_prm800k_chunks, prm800k_rows
from annotate.scales import PM1, Scale, campaign_scale
from annotate.services.adjudication import resolved_step_ratings
from rewards.formats import registry as formats
from rewards.formats.labels import step_label
from steplab.bulk import select_by_ids

NEUTRAL_POLICIES = ("positive", "negative", "exclude")
LABELED_REASONS = (models.FinishReason.SOLUTION, models.FinishReason.FOUND_ERROR)
LABEL_SOURCES = ("raw", "resolved")
STEP_MODES = ("auto", "chosen", "alternatives")


@dataclass(frozen=True)
class ExportOptions:
    neutral: str = "positive"
    seed: int = 0
    test_fraction: float = 0.1
    # QC and screening rows: None = the format's default. prm800k is the release's format and writes every row
    # with its flags, as the release does; the training formats (trl-stepwise, outcome) leave them out.
    include_qc: bool | None = None
    finish_reasons: tuple[str, ...] = tuple(LABELED_REASONS)
    generations: tuple[int, ...] | None = None
    # "raw": every labeler's own ratings; "resolved": adjudicated solutions as one row of resolved labels.
    labels: str = "raw"
    # "chosen": the labeler's path only; "alternatives": plus every rated alternative; "auto": see resolve_steps.
    steps: str = "auto"

    def __post_init__(self) -> None:
        if self.neutral not in NEUTRAL_POLICIES:
            raise ValueError(f"neutral must be one of {', '.join(NEUTRAL_POLICIES)}, got {self.neutral!r}")
        if self.labels not in LABEL_SOURCES:
            raise ValueError(f"labels must be one of {', '.join(LABEL_SOURCES)}, got {self.labels!r}")
        if self.steps not in STEP_MODES:
            raise ValueError(f"steps must be one of {', '.join(STEP_MODES)}, got {self.steps!r}")
        if not 0 <= self.test_fraction < 1:
            raise ValueError("test_fraction must be in [0, 1)")


def split_of(problem_digest: str, seed: int, test_fraction: float) -> str:
    value = int(hashlib.sha256(f"{seed}:{problem_digest}".encode()).hexdigest()[:12], 16) / float(16**12)
    return "test" if value < test_fraction else "train"


def labeled_assignments(campaign: models.Campaign, options: ExportOptions, *,
                        all_finished: bool = False) -> QuerySet[models.Assignment]:
    queryset = models.Assignment.objects.filter(solution__campaign=campaign, status=models.AssignmentStatus.SUBMITTED,
                                                is_gold=False)
    if not all_finished:
        queryset = queryset.filter(finish_reason__in=options.finish_reasons)
    include_qc = options.include_qc if options.include_qc is not None else all_finished  # all_finished: prm800k
    if not include_qc:
        queryset = queryset.filter(solution__is_quality_control=False, solution__is_screening=False)
    if options.generations is not None:
        queryset = queryset.filter(solution__generation__in=options.generations)
    return queryset


def resolve_steps(campaign: models.Campaign, options: ExportOptions) -> ExportOptions:
    """``steps="auto"`` made explicit: ``alternatives`` when the labeled rows carry rated alternatives (a
    conversational campaign, or a rating on a completion other than a step's first), else ``chosen``."""
    if options.steps != "auto":
        return options
    rich = campaign.mode == models.CampaignMode.CONVERSATIONAL or models.Rating.objects.filter(
        assignment__in=labeled_assignments(campaign, options), completion__index__gt=0).exists()
    return dataclasses.replace(options, steps="alternatives" if rich else "chosen")


@dataclass(frozen=True)
class StepPosition:
    """One step position of a labeling as the stepwise rows read it: the candidate completions in index order
    with this labeling's ratings, the chosen candidate's index and a human-written step, if any."""

    candidates: tuple[tuple[str, int | None], ...]
    chosen: int | None
    human: str | None


@dataclass(frozen=True)
class StepwiseRows:
    """A labeling's stepwise rows: the chosen path's row, and one row per rated alternative (prefix + it)."""

    chosen: dict[str, Any] | None
    alternatives: list[dict[str, Any]]

    def rows(self, steps: str) -> list[dict[str, Any]]:
        head = [self.chosen] if self.chosen is not None else []
        return head + self.alternatives if steps == "alternatives" else head


Labeled = list[tuple[str, bool, int]]  # (step text, label, raw rating)


def stepwise_paths(positions: list[StepPosition], neutral: str,
                   scale: Scale = PM1) -> tuple[Labeled, list[Labeled]]:
    """The chosen path's labeled steps, and every rated alternative as the chosen prefix up to its position
    plus the alternative. Pure (no database), so the exporter and the benchmarks build rows the same way.

    The path follows the labeler: the human-written step (rated +1), else the chosen candidate; at the position
    where no candidate was chosen the labeling stopped (its first candidate ends the path when rated −1).
    Alternatives: at each position the path reached, every other rated candidate, once per distinct text (the
    path's own step is not repeated); a neutral alternative left out under ``exclude`` gives no row.
    """
    path: Labeled = []
    alternatives: list[Labeled] = []
    for position in positions:
        prefix = list(path)
        taken: str | None = None
        rating: int | None
        stop = False
        if position.human:
            taken, rating = position.human, max(scale.allowed)
        else:
            index = position.chosen if position.chosen is not None else 0
            if index >= len(position.candidates):
                break
            text, rating = position.candidates[index]
            if position.chosen is None:  # no continuation chosen: this is where the labeler stopped
                stop = True
                if scale.is_error(rating):
                    taken = text
                    path.append((text, False, rating))  # type: ignore[arg-type]  # an error value is an int
            else:
                taken = text
        if not stop and rating is not None:
            label = step_label(rating, neutral, scale)
            if label is not None:
                path.append((taken or "", label, rating))
        seen = {taken} if taken is not None else set()
        for text, value in position.candidates:
            if value is None or text in seen:
                continue
            seen.add(text)
            label = step_label(value, neutral, scale)
            if label is not None:
                alternatives.append(prefix + [(text, label, value)])
        if stop or rating is None or scale.is_error(rating):
            break
    return path, alternatives


def iter_stepwise_groups(assignments: QuerySet[models.Assignment], options: ExportOptions,
                         chunk_size: int = 1000, *, scale: Scale = PM1) -> Iterator[StepwiseRows]:
    resolved_done: set[int] = set()
    for chunk, data in iter_prm800k_chunks(assignments, chunk_size):
        texts, ratings = _stepwise_inputs(data)
        resolved = (resolved_step_ratings({a.solution_id for a in chunk}) if options.labels == "resolved"
                    else {})
        for assignment in chunk:
            steps = data.steps_by_solution[assignment.solution_id]
            if assignment.solution_id in resolved:  # adjudicated: one row of resolved labels per solution
                if assignment.solution_id not in resolved_done:
                    resolved_done.add(assignment.solution_id)
                    row = _resolved_row(assignment, steps, texts, resolved[assignment.solution_id], options, scale)
                    if row is not None:
                        yield StepwiseRows(row, [])
                continue
            yield _stepwise_rows(assignment, steps, data, ratings, options, scale)


def iter_stepwise_rows(assignments: QuerySet[models.Assignment], options: ExportOptions,
                       chunk_size: int = 1000, *, scale: Scale = PM1) -> Iterator[dict[str, Any]]:
    for group in iter_stepwise_groups(assignments, options, chunk_size, scale=scale):
        yield from group.rows(options.steps)


def _stepwise_inputs(data: ChunkData) -> tuple[dict[tuple[int, int], tuple[int, str]], dict[tuple[int, int], Any]]:
    """A chunk's completions by (step id, index) and its rating values, as the stepwise rows read them."""
    texts = {(step_id, index): (cid, text)
             for step_id, entries in data.completions_by_step.items() for cid, index, text in entries}
    return texts, {key: value for key, (value, _, _, _) in data.ratings.items()}


def _resolved_row(assignment: models.Assignment, step_ids: list[int], texts: dict[tuple[int, int], tuple[int, str]],
                  resolved: dict[int, int], options: ExportOptions, scale: Scale = PM1) -> dict[str, Any] | None:
    """A TRL row from a solution's resolved labels: steps in order until one lacks a label or is an error."""
    completions: list[str] = []
    labels: list[bool] = []
    raw: list[int] = []
    for position, step_id in enumerate(step_ids):
        rating, entry = resolved.get(position), texts.get((step_id, 0))
        if rating is None or entry is None:
            break
        label = step_label(rating, options.neutral, scale)
        if label is not None:
            completions.append(entry[1])
            labels.append(label)
            raw.append(rating)
        if scale.is_error(rating):
            break
    if not completions:
        return None
    return _trl_row(assignment, list(zip(completions, labels, raw, strict=True)), options, assignment_id=None,
                    scale=scale)


def _trl_row(assignment: models.Assignment, steps: Labeled, options: ExportOptions, *,
             assignment_id: int | None, reasons: dict[str, str] | None = None,
             categories: dict[str, str] | None = None, scale: Scale = PM1) -> dict[str, Any]:
    """``reasons`` / ``categories``: the labeling's error step texts and their rationales / the error category
    the labeler named (both only sit on an error)."""
    problem = assignment.solution.problem
    reasons, categories = reasons or {}, categories or {}
    return {
        "prompt": problem.text,
        "completions": [text for text, _, _ in steps],
        "labels": [label for _, label, _ in steps],
        "ratings": [rating for _, _, rating in steps],
        "rationales": [reasons.get(text) if scale.is_error(rating) else None for text, _, rating in steps],
        "error_categories": [categories.get(text) if scale.is_error(rating) else None for text, _, rating in steps],
        "split": split_of(problem.text_sha256, options.seed, options.test_fraction),
        "problem_id": problem.source_id or problem.text_sha256[:16],
        "solution_id": assignment.solution_id,
        "assignment_id": assignment_id,  # None for resolved labels: they belong to no single labeling
    }


def _stepwise_rows(assignment: models.Assignment, step_ids: list[int], data: ChunkData,
                   ratings: dict[tuple[int, int], int | None], options: ExportOptions,
                   scale: Scale = PM1) -> StepwiseRows:
    positions: list[StepPosition] = []
    reasons: dict[str, str] = {}
    categories: dict[str, str] = {}
    for step_id in step_ids:
        chosen, human = data.decisions.get((assignment.pk, step_id), (None, None))
        human_text = human.get("text") if isinstance(human, dict) else human
        candidates = tuple((text, ratings.get((assignment.pk, cid)))
                           for cid, _, text in data.completions_by_step.get(step_id, ()))
        positions.append(StepPosition(candidates, chosen, human_text or None))
        for cid, _, text in data.completions_by_step.get(step_id, ()):
            _, _, rationale, category = data.ratings.get((assignment.pk, cid), (None, None, "", ""))
            if rationale:
                reasons.setdefault(text, rationale)
            if category:
                categories.setdefault(text, category)
    path, alternatives = stepwise_paths(positions, options.neutral, scale)
    return StepwiseRows(
        _trl_row(assignment, path, options, assignment_id=assignment.pk, reasons=reasons, categories=categories,
                 scale=scale)
        if path else None,
        [_trl_row(assignment, steps, options, assignment_id=assignment.pk, reasons=reasons, categories=categories,
                  scale=scale)
         for steps in alternatives],
    )


def solution_paths(solution_ids: list[int]) -> dict[int, list[str]]:
    """Each solution's step texts as its outcome is judged: at every step the completion its first finished
    labeling continued with (a human-written step, the chosen candidate), else the step's first completion.
    For a stepwise solution that is its steps; for a conversational (phase-1) one, the path the labeler took,
    which is the path whose final answer was graded (not the first candidate of every step)."""
    step_order: dict[int, tuple[int, int]] = {
        step_id: (solution_id, index) for step_id, solution_id, index in select_by_ids(
            models.Step, ["id", "solution_id", "index"], "solution_id", solution_ids)}
    texts: dict[tuple[int, int], str] = {(step_id, index): text for step_id, index, text in select_by_ids(
        models.Completion, ["step_id", "index", "text"], "step_id", list(step_order))}
    first_labeling: dict[int, int] = {}
    for assignment_id, solution_id, status in sorted(select_by_ids(models.Assignment, ["id", "solution_id", "status"],
                                                                   "solution_id", solution_ids)):
        if status == models.AssignmentStatus.SUBMITTED:
            first_labeling.setdefault(solution_id, assignment_id)
    decided: dict[int, tuple[int | None, Any]] = {}
    for _assignment_id, step_id, chosen, human in select_by_ids(
            models.StepDecision, ["assignment_id", "step_id", "chosen_completion", "human_completion"], "assignment_id",
            list(first_labeling.values())):
        decided[step_id] = (chosen, human)
    paths: dict[int, list[str]] = defaultdict(list)
    for step_id in sorted(step_order, key=step_order.__getitem__):
        chosen, human = decided.get(step_id, (None, None))
        human_text = human.get("text") if isinstance(human, dict) else human
        text = human_text or texts.get((step_id, chosen if chosen is not None else 0))
        if text is not None:
            paths[step_order[step_id][0]].append(text)
    return paths


def iter_format_rows(campaign: models.Campaign, fmt: str, options: ExportOptions) -> Iterator[dict[str, Any]]:
    """The rows of the registered format ``fmt`` (``rewards.formats``); ValueError names an unknown one."""
    return formats.get(fmt).rows(campaign, options)


class HashingWriter:
    """A binary file wrapper that computes SHA-256 and size while writing."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.handle.write(data)

    def flush(self) -> None:
        self.handle.flush()

    # pyarrow's ParquetWriter wraps this object as a Python file: it asks for these.
    @property
    def closed(self) -> bool:
        return self.handle.closed

    def tell(self) -> int:
        return self.size

    def writable(self) -> bool:
        return True


@dataclass(frozen=True)
class WrittenFile:
    path: Path
    rows: int
    sha256: str
    size: int


class _Sink:
    """One output file being written: JSONL lines, or Parquet row groups, through a hashing writer."""

    def __init__(self, out: Path, fmt: str, batch_rows: int) -> None:
        self.out = out
        self.out.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
        self.handle = os.fdopen(fd, "wb")
        self.writer = HashingWriter(self.handle)
        self.count = 0
        self.batch_rows = batch_rows
        self.batch: list[dict[str, Any]] = []
        self.parquet: Any = None
        if out.suffix == ".parquet":
            import pyarrow.parquet as pq

            self.schema = formats.get(fmt).schema()
            self.parquet = pq.ParquetWriter(self.writer, self.schema)

    def add(self, row: dict[str, Any]) -> None:
        self.count += 1
        if self.parquet is None:
            # orjson: UTF-8 as is, compact, and 6x faster than json.dumps on the 1M-rating export (3.1 s → 0.5 s)
            self.writer.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
            return
        self.batch.append(row)
        if len(self.batch) >= self.batch_rows:
            self._flush_batch()

    def _flush_batch(self) -> None:
        import pyarrow as pa

        self.parquet.write_table(pa.Table.from_pylist(self.batch, schema=self.schema))
        self.batch = []

    def close(self) -> WrittenFile:
        if self.parquet is not None:
            if self.batch or self.count == 0:
                self._flush_batch()
            self.parquet.close()
        self.writer.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.tmp_name, self.out)
        return WrittenFile(self.out, self.count, self.writer.sha256.hexdigest(), self.writer.size)

    def discard(self) -> None:
        self.handle.close()
        Path(self.tmp_name).unlink(missing_ok=True)


def write_rows_multi(rows: Iterable[dict[str, Any]], outs: list[Path], fmt: str, *,
                     batch_rows: int = 5000) -> list[WrittenFile]:
    """Write one stream of rows to several files at once (e.g. JSONL and Parquet), each atomically.

    One pass over the database feeds every output; each file is a temporary file until complete.
    """
    sinks: list[_Sink] = []
    try:
        for out in outs:
            sinks.append(_Sink(Path(out), fmt, batch_rows))
        for row in rows:
            for sink in sinks:
                sink.add(row)
        return [sink.close() for sink in sinks]
    except BaseException:
        for sink in sinks:
            sink.discard()
        raise


def iter_prm800k_and_stepwise_rows(campaign: models.Campaign, options: ExportOptions
                                   ) -> Iterator[tuple[dict[str, Any], StepwiseRows | None]]:
    """One read of the database for both the PRM800K file and the TRL stepwise file (raw labels): each finished
    assignment's PRM800K row, with its stepwise rows when its finish reason is one the dataset keeps (else None).

    The two formats read the same steps, completions and ratings; reading them once saves a third of a dataset
    version's time. Rows come in the order of the separate passes (assignment id), so the files are identical.
    """
    if options.labels != "raw":
        raise ValueError("the shared pass serves raw labels; resolved labels use iter_stepwise_rows")
    kept = set(options.finish_reasons)
    names = LabelerNames()
    scale = campaign_scale(campaign)
    for chunk, data in iter_prm800k_chunks(labeled_assignments(campaign, options, all_finished=True)):
        _, ratings = _stepwise_inputs(data)
        for assignment, prm_row in zip(chunk, prm800k_rows(chunk, data, names), strict=True):
            stepwise = (_stepwise_rows(assignment, data.steps_by_solution[assignment.solution_id], data, ratings,
                                       options, scale) if assignment.finish_reason in kept else None)
            yield prm_row, stepwise


def write_paired_rows(pairs: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]],
                      first: tuple[list[Path], str], second: tuple[list[Path], str], *,
                      batch_rows: int = 5000) -> tuple[list[WrittenFile], list[WrittenFile]]:
    """Write a stream of (row, its rows of the second kind) pairs to two sets of files at once, each atomically."""
    sinks: list[_Sink] = []
    try:
        first_sinks = [_Sink(Path(out), first[1], batch_rows) for out in first[0]]
        sinks += first_sinks
        second_sinks = [_Sink(Path(out), second[1], batch_rows) for out in second[0]]
        sinks += second_sinks
        for row, others in pairs:
            for sink in first_sinks:
                sink.add(row)
            for other in others:
                for sink in second_sinks:
                    sink.add(other)
        return [sink.close() for sink in first_sinks], [sink.close() for sink in second_sinks]
    except BaseException:
        for sink in sinks:
            sink.discard()
        raise


def write_rows(rows: Iterable[dict[str, Any]], out: Path, fmt: str, *, batch_rows: int = 5000) -> WrittenFile:
    """Write rows to ``out`` atomically (temporary file, then rename): JSONL, or Parquet for ``.parquet``."""
    return write_rows_multi(rows, [out], fmt, batch_rows=batch_rows)[0]


def export_campaign(campaign: models.Campaign, fmt: str, out: Path,
                    options: ExportOptions | None = None) -> WrittenFile:
    return write_rows(iter_format_rows(campaign, fmt, options or ExportOptions()), out, fmt)
