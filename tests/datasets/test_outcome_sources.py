"""The ``outcome`` format holds every graded solution of the campaign, as the paper's ORM was fed: labeled
solutions, imported ones nobody labeled yet, and the candidates of its pools, one row each with its source and
problem id; the dataset card counts right and wrong answers per source."""
from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotate.models import Problem
from annotate.services.problems import import_problems, import_solutions
from rewards.exports import export_campaign
from rewards.jobs.models import Candidate
from rewards.jobs.services.comparisons import first_per_problem
from rewards.jobs.services.pools import import_pool
from rewards.services.datasets import create_dataset_version
from rewards.training.data import read_dataset

from .conftest import _solution_rows, label_everything


@pytest.fixture
def outcome_campaign(db, shared_data: Path, tmp_path: Path, campaign_factory, member):
    """12 MATH-500 problems × (reference, perturbed) solutions labeled through the labeling services, plus two
    imported solutions nobody labeled, a pool of 3 candidates for each of 4 problems (one right, two wrong), and the
    pool's subset of 2 per problem (the same candidates)."""
    problem_rows, solution_rows = _solution_rows(shared_data / "math" / "math500.jsonl", 12)
    problem_file, solution_file = tmp_path / "problems.jsonl", tmp_path / "solutions.jsonl"
    problem_file.write_text("".join(json.dumps(p) + "\n" for p in problem_rows))
    solution_file.write_text("".join(json.dumps(s) + "\n" for s in solution_rows))
    math500_campaign = campaign_factory("lab", name="MATH-500 lab")
    import_problems(problem_file, math500_campaign)
    import_solutions(solution_file, math500_campaign)
    assert label_everything(math500_campaign, member(math500_campaign, "labeler1")) == 24
    problems = list(Problem.objects.filter(campaign=math500_campaign).order_by("source_id")[:4])
    imported = tmp_path / "unlabeled.jsonl"
    imported.write_text("".join(json.dumps({"problem_id": p.source_id, "steps": ["I guess.", "The answer is 1234567."],
                                            "answer": "1234567", "generation": 3}) + "\n" for p in problems[:2]))
    import_solutions(imported, math500_campaign)
    pool_file = tmp_path / "pool.jsonl"
    with pool_file.open("w") as out:
        for p in problems:
            for answer in (p.answer, "-55555", "-66666"):
                out.write(json.dumps({"problem_id": p.source_id,
                                      "solution": f"We work it out.\nSo the answer is $\\boxed{{{answer}}}$."}) + "\n")
    pool, _ = import_pool(pool_file, "lab pool", campaign=math500_campaign)
    first_per_problem(pool, 2)
    return math500_campaign


def test_outcome_rows_are_every_graded_solution_and_candidate_with_source_and_problem(
        outcome_campaign, storage_dirs, tmp_path: Path) -> None:
    written = export_campaign(outcome_campaign, "outcome", tmp_path / "outcome.parquet")
    table = pq.read_table(written.path)
    assert {"source", "problem_id", "solution_id", "candidate_id"} <= set(table.schema.names)
    rows = table.to_pylist()
    by_source = Counter((row["source"], row["label"]) for row in rows)
    # 12 problems × (reference, perturbed) labeled; 2 imported wrong answers; 4 × 3 pool candidates, the subset's
    # copies not repeated
    assert by_source == {("labeled", True): 12, ("labeled", False): 12, ("imported", False): 2,
                         ("pool", True): 4, ("pool", False): 8}
    candidates = {c.pk: c for c in Candidate.objects.select_related("pool_problem__problem")}
    for row in rows:
        if row["source"] == "pool":
            assert row["solution_id"] is None
            candidate = candidates[row["candidate_id"]]
            assert row["problem_id"] == candidate.pool_problem.problem.source_id
            assert row["label"] is candidate.is_correct and "boxed" in row["completion"]
        else:
            assert row["candidate_id"] is None and row["solution_id"] is not None
    assert len(read_dataset(written.path, "orm")) == len(rows)  # the trainer reads every row

    version = create_dataset_version(outcome_campaign)
    assert version is not None and version.files["outcome"]["rows"] == len(rows)
    assert version.counts["outcome"]["by_source"] == {
        "imported": {"correct": 0, "wrong": 2}, "labeled": {"correct": 12, "wrong": 12},
        "pool": {"correct": 4, "wrong": 8}}
    card = (storage_dirs["media"] / version.file_name("card")).read_text()
    assert "| `pool` | 4 | 8 |" in card and "| `imported` | 0 | 2 |" in card


def test_outcome_sources_option_keeps_the_old_labeled_only_rows(outcome_campaign, tmp_path: Path) -> None:
    out = tmp_path / "labeled.jsonl"
    call_command("export_dataset", "--campaign", outcome_campaign.slug, "--format", "outcome", "--out", str(out),
                 "--sources", "labeled", stdout=io.StringIO())
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 24 and {row["source"] for row in rows} == {"labeled"}
    with pytest.raises(CommandError, match="outcome: unknown source 'humans'; expected some of labeled"):
        call_command("export_dataset", "--campaign", outcome_campaign.slug, "--format", "outcome",
                     "--out", str(out), "--sources", "humans")
