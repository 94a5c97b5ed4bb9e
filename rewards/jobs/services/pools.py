"""Candidate pools for best-of-N: N sampled solutions per held-out problem, split into steps and graded.

Two JSONL layouts are accepted (one object per line):

* one problem per line (the layout of ``shared/data/bestofn/``): ``question`` or ``problem`` (text),
  ``gold_answer`` or ``answer`` (ground truth), ``generated_responses`` (list of solution texts, or that
  list written as a Python/JSON string), optional ``generated_answers`` (same length; ``""`` = no answer),
  optional ``id``;
* one candidate per line: ``problem`` (text) or ``problem_id`` (a known problem's ``source_id``),
  ``solution`` (text) or ``steps`` (list of step texts), optional ``answer`` (extracted final answer),
  optional ``ground_truth`` (else the problem's stored answer), optional ``provenance`` (an object: how the
  sample was made; ``python -m rewards.sampling sample`` writes this layout).

Every candidate is split with ``stepcore.steps`` and graded with ``stepcore.grading`` (math-verify);
a candidate's own extracted answer wins over the one found in its text. All or nothing: one bad line
and nothing is imported, with every bad line reported (file, line, field).
"""
from __future__ import annotations

import ast
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from annotate.models import Campaign, Problem, problem_key
from annotate.permissions import Actor, account_of, can_run_models, require
from annotate.services.campaign_problems import UNKNOWN_PROBLEM, bank_access, owned_problems, resolve_problems
from annotate.services.importing import ImportFailed, ImportReport, RowError, iter_json_lines
from annotate.services.problems import campaign_grader
from stepcore.graders import Grader
from stepcore.steps import check_step_rule, split_solution
from steplab import jsonlimits

from ..models import Candidate, CandidatePool, PoolProblem, PoolPurpose
from .training import MODELS_ONLY, jobs_root

BATCH = 2000


@dataclass
class ParsedCandidate:
    text: str
    steps: list[str]
    answer: str | None
    provenance: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParsedProblem:
    text: str | None
    source_id: str
    gold: str | None
    candidates: list[ParsedCandidate] = field(default_factory=list)


def _text(obj: dict[str, Any], *keys: str, required: bool = True) -> str | None:
    for key in keys:
        if key in obj and obj[key] is not None:
            value = obj[key]
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key in ("gold_answer", "answer",
                                                                                          "ground_truth", "id"):
                return str(value)
            if not isinstance(value, str):
                raise RowError(key, f"must be a string, got {type(value).__name__}")
            return value
    if required:
        raise RowError(keys[0], "is required" + (f" (or '{keys[1]}')" if len(keys) > 1 else ""))
    return None


def _list_literal(text: str, key: str) -> Any:
    """A list written as its Python repr (or as JSON). Only a string that opens a list is read at all, and what
    a hostile one makes the parsers raise (nesting past their depth, an unhashable set, the parser's own stack
    running out) is the row's error, not the import's."""
    if not text.lstrip().startswith("["):
        raise RowError(key, "is a string that is not a list literal")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        pass
    try:
        return jsonlimits.loads(text)
    except ValueError:  # json's errors, too deep, a number out of range
        raise RowError(key, "is a string that is not a list literal") from None


def _string_list(obj: dict[str, Any], key: str) -> list[str]:
    value = obj[key]
    if isinstance(value, str):  # some released pools store the list as its Python repr
        value = _list_literal(value, key)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RowError(key, "must be a list of strings")
    return value


def _candidate(text: str, steps: list[str] | None, answer: str | None, split_rule: str,
               grader: Grader) -> ParsedCandidate:
    if steps is None:
        split = split_solution(text, split_rule)
        steps, found = split.steps, grader.answer_of(text, split)
    else:
        found = grader.extract(text, steps)
    answer = answer.strip() if answer and answer.strip() else None
    return ParsedCandidate(text=text, steps=steps, answer=answer if answer is not None else found)


def parse_line(obj: Any, split_rule: str = "auto", grader: Grader | None = None) -> ParsedProblem:
    """One JSONL object → a problem with its candidates (one, in the per-candidate layout)."""
    grader = grader or campaign_grader(None)
    if not isinstance(obj, dict):
        raise RowError("", f"expected a JSON object, got {type(obj).__name__}")
    if "generated_responses" in obj:
        problem = _text(obj, "question", "problem")
        gold = _text(obj, "gold_answer", "answer")
        responses = _string_list(obj, "generated_responses")
        if not responses:
            raise RowError("generated_responses", "is empty")
        answers: list[str | None] = [None] * len(responses)
        if obj.get("generated_answers") is not None:
            answers = list(_string_list(obj, "generated_answers"))
            if len(answers) != len(responses):
                raise RowError("generated_answers", f"has {len(answers)} entries, generated_responses has "
                                                    f"{len(responses)}")
        parsed = ParsedProblem(text=problem, source_id=_text(obj, "id", required=False) or "", gold=gold)
        parsed.candidates = [_candidate(text, None, answer, split_rule, grader)
                             for text, answer in zip(responses, answers, strict=True)]
        return parsed
    problem = _text(obj, "problem", required=False)
    problem_id = _text(obj, "problem_id", required=False)
    if problem is None and problem_id is None:
        raise RowError("problem", "is required (or 'problem_id', or a per-problem line with 'generated_responses')")
    steps = None
    if "steps" in obj and obj["steps"] is not None:
        steps = _string_list(obj, "steps")
        if not steps:
            raise RowError("steps", "is empty")
        text = "\n\n".join(steps)
    else:
        # required=True (the default): never None.
        text = _text(obj, "solution")  # type: ignore[assignment]
    answer = _text(obj, "answer", required=False)
    parsed = ParsedProblem(text=problem, source_id=problem_id or "", gold=_text(obj, "ground_truth", required=False))
    provenance = obj.get("provenance") or {}
    if not isinstance(provenance, dict):
        raise RowError("provenance", f"must be an object, got {type(provenance).__name__}")
    parsed.candidates = [_candidate(text or "", steps, answer, split_rule, grader)]
    parsed.candidates[0].provenance = provenance
    return parsed


def _resolve_problem(parsed: ParsedProblem, campaign: Campaign | None) -> Problem:
    """The pool's campaign's problem (the staff bank for a pool without campaign): problems are owned by one
    campaign, and a generation makes the campaign's solutions from these."""
    if parsed.text is None:
        problem = resolve_problems(campaign, source_ids=[parsed.source_id])[0].get(parsed.source_id)
        if problem is None:
            raise RowError("problem_id", UNKNOWN_PROBLEM.format(value=parsed.source_id))
        return problem
    problem = resolve_problems(campaign, keys=[problem_key(parsed.text)])[1].get(problem_key(parsed.text))
    if problem is None:
        source_id = parsed.source_id if parsed.source_id and not owned_problems(campaign).filter(
            source_id=parsed.source_id).exists() else ""
        problem = Problem.objects.create(campaign=campaign, text=parsed.text, answer=parsed.gold, source_id=source_id)
    return problem


def import_pool(path: Path | str, name: str, *, campaign: Campaign | None = None, split_rule: str | None = None,
                user: Any = None, purpose: str = PoolPurpose.EVALUATION,
                grader: Grader | None = None) -> tuple[CandidatePool, ImportReport]:
    """Import a pool file; raises ImportFailed (nothing saved) when any line is bad. Candidates are split by
    ``split_rule`` (default: the campaign's step rule) and graded by ``grader`` (default: the campaign's, math
    without one: a math campaign may hold a multiple-choice pool, graded by letter).

    ``purpose`` labeling makes it the campaign's candidate pool that active-learning generations choose from.
    """
    path = Path(path)
    if purpose not in PoolPurpose.values:
        raise ValueError(f"purpose: must be one of {', '.join(PoolPurpose.values)}, got {purpose!r}")
    if purpose == PoolPurpose.LABELING and campaign is None:
        raise ValueError("campaign: a labeling pool belongs to a campaign (give --campaign)")
    split_rule = split_rule or (campaign.step_rule if campaign is not None else "auto")
    try:
        check_step_rule(split_rule)
    except ValueError as error:
        raise ValueError(f"split_rule: {error}") from None
    grader = grader or campaign_grader(campaign)
    if CandidatePool.objects.filter(name=name, campaign=campaign).exists():
        raise ValueError(f"name: this campaign already has a candidate pool named {name!r}")
    report = ImportReport(file=str(path))
    problems: dict[str, ParsedProblem] = {}
    order: list[str] = []
    for number, value in iter_json_lines(path):
        report.lines += 1
        if isinstance(value, RowError):
            report.reject(number, value)
            continue
        try:
            parsed = parse_line(value, split_rule, grader)
        except RowError as error:
            report.reject(number, error)
            continue
        key = parsed.text if parsed.text is not None else f"id:{parsed.source_id}"
        if key in problems:
            problems[key].candidates.extend(parsed.candidates)
            problems[key].gold = problems[key].gold or parsed.gold
        else:
            problems[key] = parsed
            order.append(key)
    if report.lines == 0:
        report.reject(0, RowError("", "the file has no lines"))
    if report.rejected_count:
        raise ImportFailed(report)
    with transaction.atomic():
        pool = CandidatePool.objects.create(name=name, campaign=campaign, source=path.name, split_rule=split_rule,
                                            created_by=user, purpose=purpose)
        candidates: list[Candidate] = []
        correct = 0
        for index, key in enumerate(order):
            parsed = problems[key]
            try:
                problem = _resolve_problem(parsed, campaign)
            except RowError as error:
                report.reject(0, error)
                raise ImportFailed(report) from None
            gold = parsed.gold if parsed.gold is not None else problem.answer
            pool_problem = PoolProblem.objects.create(pool=pool, problem=problem, index=index,
                                                      source_id=parsed.source_id)
            for number, candidate in enumerate(parsed.candidates):
                verdict = bool(grader.grade(gold, candidate.answer))
                correct += verdict
                candidates.append(Candidate(pool_problem=pool_problem, index=number, text=candidate.text,
                                            steps=candidate.steps, answer=candidate.answer, is_correct=verdict,
                                            provenance=candidate.provenance))
            if len(candidates) >= BATCH:
                Candidate.objects.bulk_create(candidates)
                report.imported += len(candidates)
                candidates = []
        Candidate.objects.bulk_create(candidates)
        report.imported += len(candidates)
        pool.problem_count = len(order)
        pool.candidate_count = report.imported
        pool.pool_size = max((len(problems[k].candidates) for k in order), default=0)
        pool.save(update_fields=["problem_count", "candidate_count", "pool_size"])
    report.created = {"problems": len(order), "candidates": report.imported, "correct": correct}
    return pool, report


def free_pool_name(campaign: Campaign | None, name: str) -> str:
    """``name``, or ``name (2)``, ``name (3)``… when the campaign has that name already: the names the product
    gives its own pools (a sampling job's, a comparison's subset) are never refused because a member chose one."""
    taken = set(CandidatePool.objects.filter(campaign=campaign, name__startswith=name).values_list("name", flat=True))
    return next(candidate for candidate in (name, *(f"{name} ({n})" for n in range(2, len(taken) + 3)))
                if candidate not in taken)


def pool_named(name: str, campaign_slug: str | None = None) -> CandidatePool:
    """The pool a staff command names: names are unique per campaign, so a name several campaigns use needs
    the campaign too. ValueError says which is missing."""
    pools = CandidatePool.objects.filter(name=name)
    if campaign_slug is not None:
        pools = pools.filter(campaign__slug=campaign_slug)
    found = list(pools.select_related("campaign")[:2])
    if not found:
        raise ValueError(f"--pool: no pool named {name!r}" + (f" in campaign {campaign_slug}" if campaign_slug else ""))
    if len(found) > 1:
        raise ValueError(f"--pool: several campaigns have a pool named {name!r}: give --campaign")
    return found[0]


def import_uploaded_pool(uploaded: Any, *, campaign: Campaign, name: str = "", purpose: str = PoolPurpose.EVALUATION,
                         split_rule: str = "auto", user: Actor) -> tuple[CandidatePool, ImportReport]:
    """A pool file sent from the browser or the API: kept under its own name (errors name it), then imported
    with ``import_pool``. Raises ImportFailed (every bad line listed) or ValueError (a bad option); NotAllowed
    unless ``user`` may run reward-model work on the campaign."""
    require(can_run_models, user, campaign, MODELS_ONLY)
    filename = Path(getattr(uploaded, "name", "") or "pool.jsonl").name
    name = name.strip() or f"{campaign.slug}-{Path(filename).stem}"
    folder = jobs_root() / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        path = Path(work) / filename
        with path.open("wb") as handle:
            for chunk in uploaded.chunks():
                handle.write(chunk)
        try:
            with bank_access(user):
                pool, report = import_pool(path, name, campaign=campaign, split_rule=split_rule, user=account_of(user),
                                           purpose=purpose)
        except ImportFailed as exc:
            raise ImportFailed(_named(exc.report, filename)) from None
    # the temporary copy is gone: record what the user sent
    CandidatePool.objects.filter(pk=pool.pk).update(source=f"upload: {filename}")
    return pool, _named(report, filename)


def _named(report: ImportReport, filename: str) -> ImportReport:
    from dataclasses import replace

    report.file = filename
    report.rejected = [replace(item, file=filename) for item in report.rejected]
    return report
