"""Machine step labels beside the human ones: import from files, what they never touch, disagreement, lease
order, what a labeler saw, agreement with humans, and the consensus export."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from annotate.models import LeaseOrder, MachineLabel, Rating, Solution, SuggestionMode
from annotate.services import labeling, leases
from annotate.services.agreement import compute_campaign_metrics
from annotate.services.machine_labels import StepValue, record_machine_labels
from annotate.workspace import load_workspace
from tests.factories import finished_labeling, numbered_solution

pytestmark = pytest.mark.django_db


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows),
                    encoding="utf-8")
    return path


def values(solution: Solution, source: str = "import:ms") -> dict[int, tuple[float, int | None]]:
    kind, name = source.split(":", 1)
    return {label.step.index: (label.value, label.rollouts) for label in
            MachineLabel.objects.filter(solution=solution, kind=kind, source=name).select_related("step")}


def steps_of(solution: Solution) -> list[str]:
    return list(solution.steps.order_by("index").values_list("completions__text", flat=True))


def test_the_three_file_shapes_import_beside_human_ratings(campaign_factory, member, tmp_path) -> None:
    campaign = campaign_factory()
    soft, first, prm800k = (numbered_solution(campaign, 4) for _ in range(3))
    human = finished_labeling(soft, member(campaign, "ann"), [1, 1, -1])
    before = list(Rating.objects.filter(assignment=human).order_by("pk").values_list("rating", "updated_at"))
    path = write_lines(tmp_path / "labels.jsonl", [
        {"solution_id": soft.pk, "labels": [1.0, 0.75, "-", 0.0], "rollouts": 8},
        {"problem": "  " + first.problem.text + "\n", "steps": steps_of(first), "first_error": 2},
        {"question": {"problem": prm800k.problem.text, "pre_generated_steps": steps_of(prm800k)},
         "label": {"steps": [{"completions": [{"text": text, "rating": rating}], "chosen_completion": None}
                             for text, rating in zip(steps_of(prm800k), [1, 0, -1], strict=False)]}},
    ])
    call_command("import_machine_labels", str(path), campaign=campaign.slug, source="ms")

    assert values(soft) == {0: (1.0, 8), 1: (0.75, 8), 2: (0.0, 8), 3: (0.0, 8)}
    # OmegaPRM's index: correct before it (inferred: 0 rollouts), wrong at it, nothing after it
    assert values(first) == {0: (1.0, 0), 1: (1.0, 0), 2: (0.0, 0)}
    assert values(prm800k) == {0: (1.0, None), 1: (0.5, None), 2: (0.0, None)}
    assert list(Rating.objects.filter(assignment=human).order_by("pk").values_list("rating", "updated_at")) == before
    soft.refresh_from_db()
    assert soft.machine_disagreement == 0.0  # one source, no Monte-Carlo estimate near 0.5


def test_bad_rows_are_named_by_file_line_and_field_and_nothing_is_written(campaign_factory, tmp_path,
                                                                          capsys) -> None:
    campaign = campaign_factory()
    solution = numbered_solution(campaign, 2)
    other = numbered_solution(campaign_factory("other"), 2)
    path = write_lines(tmp_path / "bad.jsonl", [
        {"solution_id": solution.pk, "labels": [1.0, 0.5]},
        {"solution_id": solution.pk, "labels": [1.0, 1.5]},
        {"solution_id": other.pk, "labels": [1.0]},
        {"solution_id": solution.pk, "first_error": 5},
        {"solution_id": solution.pk},
        "{not json",
        {"problem": solution.problem.text, "steps": ["Not its step."], "labels": [1]},
    ])
    with pytest.raises(CommandError, match="6 invalid line"):
        call_command("import_machine_labels", str(path), campaign=campaign.slug, source="ms")
    err = capsys.readouterr().err
    assert f"{path}:2: field 'labels[1]': must be a number in [0, 1], got 1.5" in err
    assert f"{path}:3: field 'solution_id': no solution {other.pk} in campaign {campaign.slug}" in err
    assert f"{path}:4: field 'first_error': step 5 does not exist (2 steps)" in err
    assert f"{path}:5: field 'labels': missing" in err
    assert f"{path}:6:" in err
    assert f"{path}:7: field 'steps': no solution of campaign {campaign.slug} has this problem" in err
    assert not MachineLabel.objects.exists()

    call_command("import_machine_labels", str(path), campaign=campaign.slug, source="ms", skip_invalid=True)
    assert values(solution) == {0: (1.0, None), 1: (0.5, None)}


def test_recording_a_source_again_replaces_only_that_source(campaign_factory) -> None:
    solution = numbered_solution(campaign_factory(), 3)
    record_machine_labels(labels={solution.pk: [StepValue(0, 1.0, 4), StepValue(1, 0.5, 4)]}, kind="mc",
                          source="smollm2")
    record_machine_labels(labels={solution.pk: [StepValue(0, 0.1)]}, kind="prm", source="prm-a")
    solution.refresh_from_db()
    # an estimate at 0.5 is the least certain one, and the two sources' first errors differ (none vs step 0)
    assert solution.machine_disagreement == pytest.approx(1.0 + 1.0)
    record_machine_labels(labels={solution.pk: [StepValue(0, 1.0, 8), StepValue(1, 0.0, 8)]}, kind="mc",
                          source="smollm2")
    assert values(solution, "mc:smollm2") == {0: (1.0, 8), 1: (0.0, 8)}
    assert values(solution, "prm:prm-a") == {0: (0.1, None)}
    solution.refresh_from_db()
    assert solution.machine_disagreement == pytest.approx(1.0)  # first errors differ (1 vs 0); estimates certain
    with pytest.raises(ValueError, match="has no step 7"):
        record_machine_labels(labels={solution.pk: [StepValue(7, 1.0)]}, kind="mc", source="smollm2")


def test_disagreement_first_leases_where_sources_disagree(campaign_factory, member) -> None:
    campaign = campaign_factory(lease_order=LeaseOrder.DISAGREEMENT_FIRST)
    calm, unlabeled, torn = (numbered_solution(campaign, 3) for _ in range(3))
    record_machine_labels(labels={calm.pk: [StepValue(0, 1.0, 4)], torn.pk: [StepValue(0, 1.0, 4)]}, kind="mc",
                          source="smollm2")
    record_machine_labels(labels={calm.pk: [StepValue(0, 0.9)], torn.pk: [StepValue(0, 0.1)]}, kind="prm",
                          source="p")
    order = []
    for name in ("a", "b", "c"):
        order.append(leases.lease_next_solution(campaign, member(campaign, name)).assignment.solution_id)
    assert order == [torn.pk, calm.pk, unlabeled.pk]

    in_order = campaign_factory("plain")
    first, second = numbered_solution(in_order, 2), numbered_solution(in_order, 2)
    record_machine_labels(labels={second.pk: [StepValue(0, 0.5, 2)]}, kind="mc", source="smollm2")
    assert leases.lease_next_solution(in_order, member(in_order, "d")).assignment.solution_id == first.pk


@pytest.mark.parametrize(("mode", "seen_first", "seen_again"), [
    (SuggestionMode.HIDDEN, "none", "none"),
    (SuggestionMode.AFTER_RATING, "after", "before"),
    (SuggestionMode.SHOWN, "before", "before"),
])
def test_each_rating_records_what_its_labeler_had_seen(campaign_factory, member, mode, seen_first,
                                                       seen_again) -> None:
    campaign = campaign_factory(suggestions=mode)
    solution = numbered_solution(campaign, 3)
    record_machine_labels(labels={solution.pk: [StepValue(0, 1.0, 4)]}, kind="mc", source="smollm2")
    user = member(campaign, "ann")
    assignment = leases.lease_next_solution(campaign, user).assignment
    workspace = load_workspace(assignment.pk, user)
    assert bool(workspace.suggestions) == (mode != SuggestionMode.HIDDEN)
    labeling.record_rating(assignment.pk, user=user, step_index=0, rating=1)
    assert Rating.objects.get(assignment=assignment).suggestions_seen == seen_first
    labeling.record_rating(assignment.pk, user=user, step_index=0, rating=0)
    assert Rating.objects.get(assignment=assignment).suggestions_seen == seen_again
    labeling.record_rating(assignment.pk, user=user, step_index=1, rating=1)  # step 2 has no machine label
    assert Rating.objects.get(assignment=assignment, completion__step__index=1).suggestions_seen == "none"


def test_gold_and_screening_solutions_never_show_machine_labels(campaign_factory, member) -> None:
    campaign = campaign_factory(suggestions=SuggestionMode.SHOWN, qc_rate=1.0)
    gold = numbered_solution(campaign, 2, is_quality_control=True, gold_first_error=-1)
    record_machine_labels(labels={gold.pk: [StepValue(0, 0.0, 4)]}, kind="mc", source="smollm2")
    user = member(campaign, "ann", passed_screening=True)
    assignment = leases.lease_next_solution(campaign, user).assignment
    assert assignment.solution_id == gold.pk
    assert load_workspace(assignment.pk, user).suggestions == {}
    labeling.record_rating(assignment.pk, user=user, step_index=0, rating=1)
    assert Rating.objects.get(assignment=assignment).suggestions_seen == "none"


def test_dashboard_metrics_give_each_sources_agreement_with_humans(campaign_factory, member) -> None:
    campaign = campaign_factory()
    one, two = numbered_solution(campaign, 3), numbered_solution(campaign, 3)
    ann, bob = member(campaign, "ann"), member(campaign, "bob")
    finished_labeling(one, ann, [1, 1, -1])
    finished_labeling(one, bob, [1, -1])
    finished_labeling(two, ann, [1, 0, 1])
    record_machine_labels(labels={one.pk: [StepValue(0, 0.75, 4), StepValue(1, 0.5, 4), StepValue(2, 0.0, 4)],
                                  two.pk: [StepValue(0, 1.0, 4), StepValue(1, 0.0, 4)]},
                          kind="mc", source="smollm2")
    figures = compute_campaign_metrics(campaign).data["machine_agreement"]
    # steps: ann/one 3 of 3, bob/one 1 of 2, ann/two 1 of 2 (neutral counts as correct) -> 5 of 7
    # first errors (MC: 2 on one, 1 on two): ann/one yes, bob/one no, ann/two no (none vs 1) -> 1 of 3
    assert figures == {"mc:smollm2": {"solutions": 2, "step_labels": 5,
                                      "step_agreement": {"value": pytest.approx(5 / 7), "items": 7},
                                      "first_error_agreement": {"value": pytest.approx(1 / 3), "items": 3}}}
