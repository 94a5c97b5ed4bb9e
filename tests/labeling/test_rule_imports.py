"""Imports of finished passes keep stop-at-first-error too: a stepwise-shaped PRM800K row that breaks it is
refused with its line and field, while every genuine row (conversational ones rate alternatives after a −1)
still imports."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotate.models import Rating
from annotate.services.importing import ImportFailed
from annotate.services.labeling import check_stop_at_first_error
from annotate.services.prm800k_import import import_prm800k

pytestmark = pytest.mark.django_db


def _row(ratings: list[int | None], finish: str = "found_error") -> dict:  # type: ignore[type-arg]
    return {"labeler": None, "timestamp": None, "generation": 2, "is_quality_control_question": False,
            "is_initial_screening_question": False,
            "question": {"problem": "What is $1+1$?", "ground_truth_answer": "2"},
            "label": {"steps": [{"completions": [{"text": f"Step {i}.", "rating": value, "flagged": None}],
                                 "human_completion": None, "chosen_completion": None}
                                for i, value in enumerate(ratings)],
                      "total_time": 1000, "finish_reason": finish}}


@pytest.mark.parametrize(("ratings", "expected"), [
    ([1, 0, -1], None), ([1, None, None], None), ([1, -1, None], None), ([], None),
    ([1, -1, 1], (2, "is rated after step 2's −1: nothing after the first error can be rated")),
    ([-1, None, 0], (2, "is rated after step 1's −1: nothing after the first error can be rated")),
    ([1, None, 1], (2, "is rated while step 2 is not: steps are rated in order")),
])
def test_the_rule_on_a_finished_pass(ratings, expected) -> None:
    assert check_stop_at_first_error(ratings) == expected


def test_a_stepwise_row_rated_after_its_minus_one_is_refused(tmp_path: Path, campaign_factory) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in [_row([1, -1]), _row([1, -1, 1]), _row([None, 1])]))
    campaign = campaign_factory("imported")
    with pytest.raises(ImportFailed) as failed:
        import_prm800k(path, campaign)
    rejected = [(r.line, r.field, r.message) for r in failed.value.report.rejected]
    assert rejected == [
        (2, "label.steps[2].completions[0].rating",
         "is rated after step 2's −1: nothing after the first error can be rated"),
        (3, "label.steps[1].completions[0].rating", "is rated while step 1 is not: steps are rated in order")]
    assert not Rating.objects.exists()
    report = import_prm800k(path, campaign, skip_invalid=True)
    assert report.imported == 1 and list(Rating.objects.values_list("rating", flat=True).order_by("pk")) == [1, -1]


def test_every_genuine_row_still_passes_the_rule(shared_data: Path, campaign_factory) -> None:
    for number, name in enumerate(("genuine_rows.jsonl", "phase1_test_reconstructed.jsonl")):
        report = import_prm800k(shared_data / "prm800k" / name, campaign_factory(f"g{number}"), skip_invalid=True)
        assert report.imported > 0
        assert not [r for r in report.rejected if "first error" in r.message or "in order" in r.message], name
