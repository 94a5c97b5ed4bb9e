"""MATH train problems and PRM800K phase-1 labels meet in one campaign: "Level ?" is a level unknown, a problem
whose text differs only in spacing is the same row, and every labeled solution that reaches an answer is graded,
at import and again when its problem's answer arrives later."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Campaign, Problem, Solution, normalized_problem_text
from rewards.exports import ExportOptions, iter_format_rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_phase1_train_labels_join_the_math_train_problems_and_are_graded(shared_data: Path) -> None:
    with pytest.raises(CommandError, match="does not exist"):  # import_problems never creates a campaign
        call_command("import_problems", str(shared_data / "math" / "math_train.jsonl"), "--campaign", "train")
    campaign = Campaign.objects.create(slug="train", name="train")
    call_command("import_problems", str(shared_data / "math" / "math_train.jsonl"), "--campaign", "train")
    # "Level ?" rows accepted; MATH train holds one problem twice (two ids, texts differing in one space).
    assert Problem.objects.filter(campaign=campaign).count() == 7499
    assert Problem.objects.filter(campaign=campaign, level__isnull=True).count() == 2

    call_command("import_prm800k", str(shared_data / "prm800k" / "phase1_train_reconstructed.jsonl"),
                 "--campaign", "train", "--skip-invalid")
    assert Problem.objects.filter(campaign=campaign).count() == 7499  # joined: not one new problem
    solutions = Solution.objects.filter(campaign=campaign)
    assert solutions.count() == 851
    graded = solutions.filter(is_correct__isnull=False).count()
    assert graded > 800 and solutions.filter(is_correct=True).count() > 700
    # Ungraded ones reach no `# Answer` on their chosen path.
    assert not solutions.filter(is_correct__isnull=True, final_answer__isnull=False).exists()
    outcome = list(iter_format_rows(campaign, "outcome", ExportOptions()))
    assert len(outcome) == graded  # every graded solution, labeled or not
    assert sum(row["source"] == "labeled" for row in outcome) == solutions.filter(
        is_correct__isnull=False, assignments__finish_reason__in=["solution", "found_error"]).count() > 0


def test_a_later_answer_grades_the_solutions_again(shared_data: Path, tmp_path: Path) -> None:
    row = json.loads((shared_data / "prm800k" / "genuine_rows.jsonl").read_text().splitlines()[2])
    answer = row["question"]["ground_truth_answer"]
    row["question"]["ground_truth_answer"] = None
    row["question"]["problem"] = "  " + row["question"]["problem"].replace(" ", "\n", 1) + "\n"
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    call_command("import_prm800k", str(rows), "--campaign", "later")
    solution = Solution.objects.get(campaign__slug="later")
    assert solution.is_correct is None and solution.final_answer == row["question"]["pre_generated_answer"]
    problems = tmp_path / "problems.jsonl"
    text = normalized_problem_text(row["question"]["problem"])
    problems.write_text(json.dumps({"problem": text, "answer": row["question"]["pre_generated_answer"]}) + "\n")
    call_command("import_problems", str(problems), "--campaign", "later")
    solution.refresh_from_db()
    assert solution.is_correct is True and Problem.objects.filter(campaign__slug="later").count() == 1
    problems.write_text(json.dumps({"problem": text, "answer": answer}) + "\n")
    call_command("import_problems", str(problems), "--campaign", "later")
    solution.refresh_from_db()
    assert solution.is_correct is (solution.final_answer.strip() == answer.strip())
