"""Candidate-pool import: split into steps and graded with the project's grader; bad lines name line and field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.services.importing import ImportFailed

pytestmark = pytest.mark.django_db


def test_aime_pool_import_splits_and_grades(aime_pool_file: Path) -> None:
    from rewards.jobs.models import Candidate, CandidatePool
    from rewards.jobs.services.pools import import_pool

    pool, report = import_pool(aime_pool_file, "aime")
    assert (pool.problem_count, pool.candidate_count, pool.pool_size) == (3, 24, 8)
    source = [json.loads(line) for line in aime_pool_file.read_text().splitlines()]
    candidates = list(Candidate.objects.filter(pool_problem__pool=pool).select_related("pool_problem__problem")
                      .order_by("pool_problem__index", "index"))
    theirs = [c for row in source for c in row["answers_correctness"][:8]]
    ours = [c.is_correct for c in candidates]
    assert ours == theirs  # math-verify agrees with the released per-sample verdicts here
    assert report.created["correct"] == sum(theirs) > 0
    assert all(c.steps for c in candidates if c.text.strip())
    assert sorted(len(c.steps) for c in candidates)[12] >= 3  # paragraphs of model output: several steps each
    assert candidates[0].pool_problem.problem.answer == source[0]["gold_answer"]
    assert [c.answer for c in candidates[:8]] == [a or None for a in source[0]["generated_answers"][:8]]
    assert CandidatePool.objects.count() == 1


def test_per_candidate_layout_with_steps_and_problem_id(tmp_path: Path) -> None:
    from annotate.models import Problem
    from rewards.jobs.services.pools import import_pool

    Problem.objects.create(text="What is $\\frac{1}{2}+\\frac{1}{2}$?", answer="1", source_id="test/half.json")
    path = tmp_path / "pool.jsonl"
    rows = [{"problem_id": "test/half.json", "steps": ["Add the halves.", "# Answer\n\n1"]},
            {"problem_id": "test/half.json", "solution": "It is $\\boxed{\\frac{2}{2}}$."},
            {"problem_id": "test/half.json", "solution": "No idea."},
            {"problem": "2+2?", "ground_truth": "4", "solution": "So \\boxed{5}", "answer": "5"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pool, report = import_pool(path, "mixed")
    assert (pool.problem_count, pool.candidate_count, pool.pool_size) == (2, 4, 3)
    first = pool.problems.get(index=0).candidates.order_by("index")
    assert [(c.answer, c.is_correct) for c in first] == [("1", True), ("\\frac{2}{2}", True), (None, False)]
    assert first[0].steps == ["Add the halves.", "# Answer\n\n1"]
    assert pool.problems.get(index=1).candidates.get().is_correct is False
    assert report.created == {"problems": 2, "candidates": 4, "correct": 2}


def test_bad_lines_name_line_and_field_and_save_nothing(tmp_path: Path, aime_pool_file: Path) -> None:
    from rewards.jobs.models import Candidate, CandidatePool
    from rewards.jobs.services.pools import import_pool

    good = aime_pool_file.read_text().splitlines()[0]
    row = json.loads(good)
    bad_answers = dict(row, generated_answers=row["generated_answers"][:3])
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([good, json.dumps(bad_answers), "{not json", json.dumps({"solution": "x"}),
                               json.dumps(dict(row, generated_responses=str(row["generated_responses"])))]) + "\n")
    with pytest.raises(ImportFailed) as failure:
        import_pool(path, "bad")
    messages = [str(r) for r in failure.value.report.rejected]
    assert messages[0].endswith(":2: field 'generated_answers': has 3 entries, generated_responses has 8")
    assert ":3: not valid JSON" in messages[1]
    assert ":4: field 'problem': is required" in messages[2]
    assert len(messages) == 3  # line 5: the list written as a Python string is accepted
    assert not CandidatePool.objects.exists() and not Candidate.objects.exists()
