"""MMLU-Pro rows as they are through the commands (create_campaign, import_problems, import_solutions,
export_dataset), the generic importer's bad lines named by line and field, and the demo-mmlu campaign."""
from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotate.models import Campaign, Membership, Problem, Role, Solution
from tests.factories import CampaignFactory, CandidatePoolFactory, finished_labeling

pytestmark = pytest.mark.django_db


def _head(path: Path, count: int) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in itertools.islice(handle, count)]


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def _call(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_create_campaign_command_sets_the_domain_and_its_admin(make_user) -> None:
    make_user("carol")
    output = _call("create_campaign", "law", "--name", "Law", "--scale", "binary", "--grader", "multiple_choice",
                   "--steps", "sentence", "--admin", "carol", "--error-categories", "misread the question, factual")
    campaign = Campaign.objects.get(slug="law")
    assert "created campaign 'law'" in output
    assert (campaign.grader, campaign.step_rule, campaign.step_scale) == ("multiple_choice", "sentence",
                                                                          {"name": "binary"})
    assert campaign.error_categories == ["misread the question", "factual"]
    assert Membership.objects.get(campaign=campaign, user__username="carol").role == Role.ADMIN
    _call("create_campaign", "plain", "--name", "Plain")
    assert Campaign.objects.get(slug="plain").step_scale == {} and not Membership.objects.filter(
        campaign__slug="plain").exists()
    for args, message in ((["--steps", "regex:("], "--steps: step rule"), (["--scale", "tenfold"], "--scale"),
                          (["--admin", "nobody"], "--admin: no user"), (["--grader", "astrology"], "invalid choice")):
        with pytest.raises(CommandError, match=message):
            _call("create_campaign", "bad", "--name", "Bad", *args)
    assert not Campaign.objects.filter(slug="bad").exists()


def test_mmlu_pro_rows_import_as_they_are_and_are_graded_by_letter(shared_data: Path, tmp_path: Path,
                                                                   make_user) -> None:
    _call("create_campaign", "mmlu", "--name", "MMLU", "--grader", "multiple_choice", "--steps", "sentence")
    campaign = Campaign.objects.get(slug="mmlu")
    questions = _head(shared_data / "mmlu-pro/questions.jsonl", 60)
    ids = {row["question_id"] for row in questions}
    with (shared_data / "mmlu-pro/responses.jsonl").open(encoding="utf-8") as handle:
        responses = [row for row in map(json.loads, handle) if row["question_id"] in ids]
    assert len(responses) > 300
    _call("import_problems", str(_write(tmp_path / "questions.jsonl", questions)), "--campaign", "mmlu")
    problem = Problem.objects.get(campaign=campaign, source_id=str(questions[0]["question_id"]))
    assert problem.options == questions[0]["options"] and problem.answer == questions[0]["answer"]
    assert problem.subject == questions[0]["category"]
    output = _call("import_solutions", str(_write(tmp_path / "responses.jsonl", responses)), "--campaign", "mmlu")
    assert f"imported {len(responses)} of {len(responses)}" in output
    solutions = Solution.objects.filter(campaign=campaign)
    gold = {str(row["question_id"]): row["answer"] for row in questions}
    for solution, row in zip(solutions.order_by("pk").select_related("problem"), responses, strict=True):
        # graded by the letter the response chose, never by the benchmark's pred (kept as provenance)
        assert solution.provenance["pred"] == row["pred"] and solution.generator == row["model"]
        assert solution.is_correct == (None if solution.final_answer is None
                                       else solution.final_answer == gold[solution.problem.source_id])
        assert solution.steps.count() == len(solution.pre_generated_steps) >= 1
    agree = sum(s.final_answer == s.provenance["pred"] for s in solutions if s.provenance["pred"] is not None)
    assert agree >= 0.99 * solutions.exclude(provenance__pred=None).count()
    assert solutions.filter(is_correct=True).exists() and solutions.filter(is_correct=False).exists()
    # the outcome export carries every graded solution's correctness, the labeled ones marked as such
    labeler = make_user("ann")
    labeled = [solutions.filter(is_correct=True).first(), solutions.filter(is_correct=False).first()]
    for solution in labeled:
        assert solution is not None
        finished_labeling(solution, labeler, [1] * solution.steps.count())
    out = tmp_path / "outcome.jsonl"
    _call("export_dataset", "--campaign", "mmlu", "--format", "outcome", "--out", str(out))
    rows = {row["solution_id"]: row for row in map(json.loads, out.read_text().splitlines())}
    graded = {solution.pk: solution.is_correct for solution in solutions if solution.is_correct is not None}
    assert {pk: row["label"] for pk, row in rows.items()} == graded
    assert {pk for pk, row in rows.items() if row["source"] == "labeled"} == {s.pk for s in labeled if s}


def test_generic_rows_bad_lines_are_named_by_line_and_field(tmp_path: Path, campaign_factory) -> None:
    campaign_factory("generic", grader="exact")
    good = {"question": "Capital of France?", "question_id": "q1", "answer": "Paris", "category": "geography"}
    rows = [good,
            {"question": "Pick one", "id": "q2", "options": [], "answer": "A"},  # one option would do, none not
            {"question": "Pick one", "id": "q3", "options": ["a", "b"], "answer": "C"},
            {"question": "", "id": "q4"},
            {"question": "Pick", "id": "q5", "options": ["a", 3], "answer": "A"},
            "{not json"]
    with pytest.raises(CommandError) as failed:
        _call("import_problems", str(_write(tmp_path / "p.jsonl", rows)), "--campaign", "generic")
    assert "5 invalid line(s)" in str(failed.value)
    assert not Problem.objects.exists()  # all or nothing
    from annotate.services.importing import ImportFailed
    from annotate.services.problems import import_problems, import_solutions

    with pytest.raises(ImportFailed) as error:
        import_problems(tmp_path / "p.jsonl", Campaign.objects.get(slug="generic"))
    named = {(item.line, item.field) for item in error.value.report.rejected}
    assert named == {(2, "options"), (3, "answer"), (4, "question"), (5, "options[1]"), (6, "")}
    import_problems(_write(tmp_path / "ok.jsonl", [good]), Campaign.objects.get(slug="generic"))
    answers = [{"question_id": "q1", "model": "m", "response": "Some thought.\nAnswer: paris."},
               {"question_id": "q1", "model": "m", "steps": ["Thought.", "Answer: Lyon"]},
               {"question_id": "q1", "model": "m", "response": 7},
               {"question_id": "nope", "model": "m", "response": "x"},
               {"question_id": "q1", "model": "m"},
               {"question_id": "q1", "model": "m", "response": "x", "pred": 3}]
    with pytest.raises(ImportFailed) as error:
        import_solutions(_write(tmp_path / "s.jsonl", answers), Campaign.objects.get(slug="generic"))
    named = {(item.line, item.field) for item in error.value.report.rejected}
    assert named == {(3, "response"), (4, "problem_id"), (5, "solution"), (6, "pred")}
    assert not Solution.objects.exists()
    import_solutions(_write(tmp_path / "s2.jsonl", answers[:2]), Campaign.objects.get(slug="generic"))
    assert sorted(Solution.objects.values_list("is_correct", flat=True)) == [False, True]


def test_demo_mmlu_loads_with_its_queue_pool_and_the_math_headroom_pool(settings, tmp_path: Path) -> None:
    from demo.loader import MMLU_SLUG, headroom_pool_name, import_headroom_pool, load_demo_mmlu
    from rewards.jobs.models import Candidate, CandidatePool
    from rewards.jobs.services.comparisons import comparison_pool

    counts = load_demo_mmlu()
    campaign = Campaign.objects.get(slug=MMLU_SLUG)
    assert counts["problems"] == 180 and counts["to_label"] == 360 and counts["pool_candidates"] == 990
    assert set(campaign.problems.values_list("subject", flat=True)) == {
        "law", "health", "philosophy", "economics", "engineering", "business"}
    assert campaign.problems.filter(options__isnull=False).count() == 180
    queue = campaign.solutions.all()
    assert queue.filter(is_correct=True).exists() and queue.filter(is_correct=False).exists()
    assert queue.filter(steps__index=3).exists()  # split into sentences
    pool = CandidatePool.objects.get(campaign=campaign)
    assert pool.pool_size == 11 and pool.split_rule == "sentence"
    assert load_demo_mmlu() == {}  # idempotent

    math_demo = CampaignFactory(slug="demo", name="demo")
    # a larger pool (the demo's AIME one has 1,920 candidates) would be the default by size: the flag wins
    CandidatePoolFactory(campaign=math_demo, candidate_count=1920, purpose="evaluation")
    assert import_headroom_pool(math_demo) == 660
    headroom = CandidatePool.objects.get(campaign=math_demo, name=headroom_pool_name(math_demo))
    assert comparison_pool(math_demo) == headroom and headroom.comparison_default
    candidates = Candidate.objects.filter(pool_problem__pool=headroom)
    pass_at_1 = candidates.filter(is_correct=True).count() / candidates.count()
    pass_at_11 = headroom.problems.filter(candidates__is_correct=True).distinct().count() / headroom.problem_count
    assert 0.2 < pass_at_1 < 0.5 and pass_at_11 > 0.7
    assert import_headroom_pool(math_demo) == 0
