"""Importing PRM800K rows (``annotate.prm800k`` parses them): each row its own Solution + Assignment, written
in batches through the COPY machinery of ``importing``, problems and imported labelers looked up per batch."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import chain, repeat
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from stepcore.grading import answers_match
from steplab.bulk import (
    JsonText,
    PreparedRows,
    ProgressCallback,
    allocate_ids,
    bulk_insert,
    fewer_collections,
    import_transaction,
    json_text,
    prepare_columns,
    read_ahead,
    refresh_planner_statistics,
    write_prepared,
)

from ..models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    Completion,
    FinishReason,
    Problem,
    Rating,
    Solution,
    Step,
    StepDecision,
    problem_key,
)
from ..prm800k import (
    ParsedRow,
    assignment_extra,
    content_digest,
    float_or_none,
    labeler_account,
    parse_row,
    parse_timestamp,
    question_from_fields,
    solution_extra,
)
from .campaign_problems import new_problem, resolve_problems
from .importing import ImportFailed, ImportReport, valid_rows


class _Lookups:
    """Caches of the campaign's problems and of imported labeler accounts: a batch costs a constant number of
    queries."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.problems: dict[str, Problem] = {}
        self.users: dict[str, int] = {}
        self.keys: dict[str, str] = {}  # problem text as given -> its key

    def key_of(self, text: str) -> str:
        """``problem_key(text)``, computed once per distinct text: every labeler's row repeats its problem's."""
        key = self.keys.get(text)
        if key is None:
            if len(self.keys) > 50_000:  # bound the cache on huge files
                self.keys.clear()
            key = self.keys[text] = problem_key(text)
        return key

    def problems_for(self, rows: list[ParsedRow], keys: list[str], created: dict[str, int]) -> None:
        """Load or create the problems of ``rows``, whose normalised-text keys are ``keys``."""
        wanted: dict[str, ParsedRow] = {}
        for row, key in zip(rows, keys, strict=True):
            if key not in self.problems:
                wanted.setdefault(key, row)
        if not wanted:
            return
        self.problems.update(resolve_problems(self.campaign, keys=wanted)[1])
        new = [new_problem(self.campaign, wanted[key].question["problem"],
                           answer=wanted[key].question.get("ground_truth_answer"),
                           solution=wanted[key].question.get("ground_truth_solution"))
               for key in wanted if key not in self.problems]
        for problem in bulk_insert(new):
            self.problems[problem.key_sha256] = problem
        created["problems"] = created.get("problems", 0) + len(new)

    def users_for(self, rows: list[ParsedRow], created: dict[str, int]) -> None:
        names = {labeler_account(row.labeler) for row in rows if row.labeler is not None} - self.users.keys()
        if not names:
            return
        User = get_user_model()
        for pk, username in User.objects.filter(username__in=names).values_list("pk", "username"):
            self.users[username] = pk
        missing = sorted(names - set(self.users))
        # Inactive accounts with unusable passwords, in their own namespace: they exist for provenance only.
        new_users = [User(username=name, is_active=False, password="!imported") for name in missing]
        for user in User.objects.bulk_create(new_users, batch_size=500):
            self.users[user.username] = user.pk
        if not all(user.pk for user in new_users):  # databases that return no pks from bulk_create
            for pk, username in User.objects.filter(username__in=missing).values_list("pk", "username"):
                self.users[username] = pk
        created["users"] = created.get("users", 0) + len(missing)


_SOLUTION_COLUMNS = ["campaign_id", "problem_id", "generation", "is_quality_control", "is_screening", "final_answer",
                     "is_correct", "verifier_score", "pre_generated_steps", "generator", "label_count", "provenance",
                     "content_sha256", "source_extra"]
_ASSIGNMENT_COLUMNS = ["solution_id", "labeler_id", "status", "finished_at", "finish_reason", "total_time_ms",
                       "source_timestamp", "source_extra"]
_PROVENANCE = {"source": "prm800k"}


@dataclass
class _Batch:
    """A batch of valid rows with everything of theirs that needs no database — answers, assignment extras, and
    the columns of their steps, completions, ratings and decisions — made in the read-ahead thread, so that it
    overlaps the server's work on the previous batch. Ids are added with C-level repeats (``_repeated``),
    without a Python loop over steps or completions: in that thread on PostgreSQL (``ids``, ``label_rows``), by
    the main thread otherwise."""

    rows: list[ParsedRow]
    answers: list[str | None]
    verifier_scores: list[float | None]
    # Per row: its question's (problem, ground truth answer, ground truth solution), and the content digest and
    # source_extra its solution gets when its campaign problem has exactly those fields (nearly always: the
    # problem was made from the first row that names it) — the main thread recomputes them otherwise.
    problem_fields: list[tuple[str, str | None, str | None]]
    digests: list[str]
    solution_extras: list[JsonText | None]
    pre_generated_steps: list[JsonText | None]  # each row's, as JSON
    assignment_extras: list[dict[str, Any]]
    finished_at: list[datetime | None]
    steps_per_row: list[int]
    completions_per_row: list[int]
    completions_per_step: list[int]
    step_indexes: list[int]
    completion_indexes: list[int]
    texts: list[str]
    values: list[int | None]
    flags: list[bool | None]
    rationales: list[str]
    # The step decisions worth a row: where the labeler chose a completion or wrote a step, or where the step has
    # no completion (nothing else records that the labeling reached it). Absent, a decision reads as
    # (None, None): a stepwise million-rating file has almost none, which saves a million rows.
    decision_rows: list[int]  # the row (its position in ``rows``) of each decision
    decision_steps: list[int]  # its step's position among the batch's steps
    chosen: list[int | None]
    human: list[Any]
    conversational: int
    # PostgreSQL: the batch's new ids, reserved in the read-ahead thread (a sequence hands out ids outside any
    # transaction), and its steps, completions, ratings and decisions formatted there; else made by the main thread.
    ids: _BatchIds | None = None
    label_rows: list[PreparedRows] | None = None


@dataclass
class _BatchIds:
    """The primary keys of a batch's new rows, table by table, in row order."""

    solutions: list[int]
    assignments: list[int]
    steps: list[int]
    completions: list[int]

    @classmethod
    def allocate(cls, batch: _Batch) -> _BatchIds:
        return cls(solutions=allocate_ids(Solution, len(batch.rows)),
                   assignments=allocate_ids(Assignment, len(batch.rows)),
                   steps=allocate_ids(Step, len(batch.step_indexes)),
                   completions=allocate_ids(Completion, len(batch.texts)))


def _label_rows(batch: _Batch, ids: _BatchIds) -> list[PreparedRows]:
    """The batch's steps, completions, ratings (one per completion) and step decisions (see ``_Batch``), their
    ids repeated per row with C-level repeats (``_repeated``): no Python loop over steps."""
    return [
        prepare_columns(Step, ["solution_id", "index"], [_repeated(ids.solutions, batch.steps_per_row),
                                                         batch.step_indexes], ids=ids.steps),
        prepare_columns(Completion, ["step_id", "index", "text"], [
            _repeated(ids.steps, batch.completions_per_step), batch.completion_indexes, batch.texts],
            ids=ids.completions),
        prepare_columns(Rating, ["assignment_id", "completion_id", "rating", "flagged", "rationale"], [
            _repeated(ids.assignments, batch.completions_per_row), ids.completions, batch.values, batch.flags,
            batch.rationales], ids=allocate_ids(Rating, len(batch.values))),
        prepare_columns(StepDecision, ["assignment_id", "step_id", "chosen_completion", "human_completion"], [
            [ids.assignments[row] for row in batch.decision_rows], [ids.steps[step] for step in batch.decision_steps],
            batch.chosen, batch.human], ids=allocate_ids(StepDecision, len(batch.chosen))),
    ]


def _prepare(batch: list[tuple[int, ParsedRow]], *, write_ahead: bool) -> _Batch:
    """A ``_Batch`` of ``batch``; ``write_ahead``: also reserve its ids and format its label rows where the
    database allows it (not once the import is known to fail: the rest of the file is then only checked)."""
    rows = [row for _, row in batch]
    prepared = _Batch(rows=rows, answers=[row.final_answer() for row in rows],
                      verifier_scores=[float_or_none(row.question.get("pre_generated_verifier_score"))
                                       for row in rows],
                      problem_fields=[], digests=[], solution_extras=[], pre_generated_steps=[],
                      assignment_extras=[],
                      finished_at=[parse_timestamp(row.timestamp) for row in rows], steps_per_row=[],
                      completions_per_row=[], completions_per_step=[], step_indexes=[], completion_indexes=[],
                      texts=[], values=[], flags=[], rationales=[], decision_rows=[],
                      decision_steps=[], chosen=[], human=[],
                      conversational=sum(row.is_conversational for row in rows))
    for position, (row, answer, verifier_score) in enumerate(zip(rows, prepared.answers, prepared.verifier_scores,
                                                                    strict=True)):
        fields = (row.question["problem"], row.question.get("ground_truth_answer"),
                  row.question.get("ground_truth_solution"))
        as_given = Problem(text=fields[0], answer=fields[1], solution=fields[2])  # unsaved: its fields only
        prepared.problem_fields.append(fields)
        prepared.digests.append(_solution_digest(as_given, row))
        prepared.solution_extras.append(json_text(solution_extra(row, row.question, question_from_fields(
            as_given, pre_generated_steps=row.question.get("pre_generated_steps"), final_answer=answer,
            verifier_score=verifier_score))))
        prepared.pre_generated_steps.append(json_text(row.question.get("pre_generated_steps")))
        prepared.assignment_extras.append(assignment_extra(row))
        first_step = len(prepared.step_indexes)  # this row's first step among the batch's
        prepared.steps_per_row.append(len(row.steps))
        prepared.step_indexes.extend(range(len(row.steps)))
        in_row = 0
        for step_index, parsed_step in enumerate(row.steps):
            count = len(parsed_step.completions) if parsed_step.completions else 0
            if (parsed_step.chosen_completion is not None or parsed_step.human_completion is not None
                    or count == 0):
                prepared.decision_rows.append(position)
                prepared.decision_steps.append(first_step + step_index)
                prepared.chosen.append(parsed_step.chosen_completion)
                prepared.human.append(parsed_step.human_completion)
            prepared.completions_per_step.append(count)
            in_row += count
            if count:
                prepared.completion_indexes.extend(range(count))
                for parsed in parsed_step.completions or ():
                    prepared.texts.append(parsed.text)
                    prepared.values.append(parsed.rating)
                    prepared.flags.append(parsed.flagged)
                    prepared.rationales.append(parsed.rationale)
        prepared.completions_per_row.append(in_row)
    if write_ahead and connection.vendor == "postgresql":  # SQLite hands out ids only under the write lock
        prepared.ids = _BatchIds.allocate(prepared)
        prepared.label_rows = _label_rows(prepared, prepared.ids)
    return prepared


def _solution_digest(problem: Problem, row: ParsedRow) -> str:
    """``content_sha256`` of a row's solution: its problem's text and the steps it labels."""
    return content_digest(problem.text, row.question.get("pre_generated_steps")
                          or [s.completions[0].text if s.completions else "" for s in row.steps])


def _repeated(ids: list[int], counts: list[int]) -> list[int]:
    """Each id as many times as its count says, in order."""
    return list(chain.from_iterable(map(repeat, ids, counts)))


def _import_batch(campaign: Campaign, batch: _Batch, lookups: _Lookups, created: dict[str, int]) -> None:
    # Solutions and assignments go in as plain values: model instances cost more than their COPY.
    rows = batch.rows
    keys = [lookups.key_of(row.question["problem"]) for row in rows]
    lookups.problems_for(rows, keys, created)
    lookups.users_for(rows, created)
    solution_rows: list[tuple[Any, ...]] = []
    for position, (row, key) in enumerate(zip(rows, keys, strict=True)):
        problem = lookups.problems[key]
        question = row.question
        answer, verifier_score = batch.answers[position], batch.verifier_scores[position]
        ground_truth = problem.answer if problem.answer is not None else question.get("ground_truth_answer")
        verdict = answers_match(ground_truth, answer)
        outcome = "graded_correct" if verdict else "graded_wrong" if verdict is False else "ungraded"
        created[outcome] = created.get(outcome, 0) + 1
        extra: dict[str, Any] | JsonText | None
        if (problem.text, problem.answer, problem.solution) == batch.problem_fields[position]:
            digest, extra = batch.digests[position], batch.solution_extras[position]
        else:  # the campaign's problem differs from this row's question (spacing, another ground truth)
            digest = _solution_digest(problem, row)
            extra = solution_extra(row, question, question_from_fields(
                problem, pre_generated_steps=question.get("pre_generated_steps"), final_answer=answer,
                verifier_score=verifier_score))
        solution_rows.append((campaign.pk, problem.pk, row.generation, row.is_quality_control, row.is_screening,
                              answer, verdict, verifier_score, batch.pre_generated_steps[position], "prm800k", 1,
                              _PROVENANCE, digest, extra))
    ids = batch.ids or _BatchIds.allocate(batch)
    write_prepared(prepare_columns(Solution, _SOLUTION_COLUMNS, list(zip(*solution_rows, strict=True)),
                                   ids=ids.solutions))
    write_prepared(prepare_columns(Assignment, _ASSIGNMENT_COLUMNS, [
        ids.solutions,
        [lookups.users[labeler_account(row.labeler)] if row.labeler is not None else None for row in rows],
        [AssignmentStatus.SUBMITTED.value] * len(rows),
        batch.finished_at,
        [row.finish_reason or FinishReason.GIVE_UP.value for row in rows],
        [row.total_time for row in rows],
        [row.timestamp or "" for row in rows],
        batch.assignment_extras,
    ], ids=ids.assignments))
    for prepared in batch.label_rows or _label_rows(batch, ids):
        write_prepared(prepared)
    for name, count in (("solutions", len(ids.solutions)), ("steps", len(ids.steps)), ("ratings", len(batch.values))):
        created[name] = created.get(name, 0) + count


def import_prm800k(path: Path | str, campaign: Campaign, *, skip_invalid: bool = False,
                   progress: ProgressCallback | None = None, adopt_mode: bool = False) -> ImportReport:
    """Import a PRM800K JSONL file into ``campaign``; all or nothing unless ``skip_invalid``.

    One pass, parsing each line once (parsing is a third of the import's time on 1M ratings): rows are written
    while the file is read, inside one transaction. The first bad line stops the writing — the rest is only
    parsed, so that every bad line is reported — and the transaction is rolled back: nothing is imported.
    Problems are the campaign's own (joined on the normalised text); every solution that reaches an answer is
    graded against its problem's ground truth. ``adopt_mode``: the campaign takes the mode its rows imply
    (conversational when most rows are phase-1 rows, whose steps carry several rated completions; else stepwise).
    """
    path = Path(path)
    report = ImportReport(file=str(path))
    lookups = _Lookups(campaign)
    conversational = 0
    try:
        with fewer_collections(), import_transaction():
            def prepare(batch: list[tuple[int, ParsedRow]]) -> _Batch:
                return _prepare(batch, write_ahead=skip_invalid or not report.rejected_count)

            batches = read_ahead(lambda relay: map(prepare, valid_rows(
                path, parse_row, settings.STEPLAB_IMPORT_BATCH, relay, report=report)), progress)
            for batch in batches:
                if report.rejected_count and not skip_invalid:
                    continue
                conversational += batch.conversational
                _import_batch(campaign, batch, lookups, report.created)
                report.imported += len(batch.rows)
            if report.rejected_count and not skip_invalid:
                raise ImportFailed(report)
            if adopt_mode:
                phase1 = conversational * 2 > report.imported
                campaign.mode = CampaignMode.CONVERSATIONAL if phase1 else CampaignMode.STEPWISE
                campaign.save(update_fields=["mode", "updated_at"])
    except ImportFailed:
        report.imported, report.created = 0, {}
        raise
    refresh_planner_statistics(Problem, Solution, Assignment, Step, Completion, Rating, StepDecision)
    return report
