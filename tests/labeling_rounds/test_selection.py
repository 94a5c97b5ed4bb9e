"""Strategies through the service on the hand-built scored pool; never reselecting; provenance in exports."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from django.core.management import call_command

from annotate.permissions import SYSTEM

pytestmark = pytest.mark.django_db


def _picked(hand_pool, generation):
    from annotate.models import Solution

    solutions = Solution.objects.filter(campaign=hand_pool.campaign, generation=generation.number)
    return [hand_pool.name_of(s.provenance["candidate_id"])
            for s in sorted(solutions, key=lambda s: s.provenance["rank"])]


def test_convincing_wrong_takes_top_wrong_answers_capped_per_problem(hand_pool) -> None:
    generation = hand_pool.run("convincing_wrong", 4, {"max_per_problem": 2})
    assert generation.status == "completed" and generation.selected_count == 4
    # wrong answers by score: a .95, b .90, (c .85: problem 1 full), f .80, (e .50: full), g .40
    assert _picked(hand_pool, generation) == ["a", "b", "f", "g"]


def test_uncertain_takes_scores_nearest_one_half(hand_pool) -> None:
    generation = hand_pool.run("uncertain", 3)
    # |score - .5|: e .00, h .05, g .10 (k .52 has no steps: it cannot be labeled, so it is not scored)
    assert _picked(hand_pool, generation) == ["e", "h", "g"]


def test_mixed_fills_its_buckets(hand_pool) -> None:
    from annotate.models import Solution

    generation = hand_pool.run("mixed", 4, {"convincing_wrong_share": 0.5, "convincing_share": 0.5,
                                            "random_share": 0.0, "max_per_problem": 2})
    # 2 convincing-wrong (a, b); 2 convincing by score: d .99 skipped (problem 1 full), f .80, i .70
    assert _picked(hand_pool, generation) == ["a", "b", "f", "i"]
    reasons = dict(Solution.objects.filter(generation=generation.number, campaign=hand_pool.campaign)
                   .values_list("provenance__candidate_id", "provenance__reason"))
    assert reasons == {hand_pool.candidates["a"].pk: "convincing_wrong",
                       hand_pool.candidates["b"].pk: "convincing_wrong",
                       hand_pool.candidates["f"].pk: "convincing", hand_pool.candidates["i"].pk: "convincing"}


def test_random_is_the_seeded_shuffle_of_the_open_candidates(hand_pool) -> None:
    generation = hand_pool.run("random", 3, {"seed": 5})
    eligible = sorted(str(c.pk) for c in hand_pool.candidates.values() if c.steps)
    random.Random(5).shuffle(eligible)
    assert _picked(hand_pool, generation) == [hand_pool.name_of(int(i)) for i in eligible[:3]]


def test_random_without_any_prm_completes_at_once(hand_pool) -> None:
    from annotate.models import Solution
    from rewards.jobs.models import RewardModel
    from rewards.jobs.services.labeling_rounds import start_labeling_round
    from rewards.jobs.services.training import JobInputError

    RewardModel.objects.all().delete()
    with pytest.raises(JobInputError, match="^reward_model: .* has no trained PRM yet"):
        start_labeling_round(hand_pool.campaign, strategy="convincing_wrong", batch_size=2, user=SYSTEM)
    generation = start_labeling_round(hand_pool.campaign, strategy="random", batch_size=2, user=SYSTEM)
    assert generation.status == "completed" and generation.scoring_job is None and generation.selected_count == 2
    scores = Solution.objects.filter(generation=generation.number).values_list("verifier_score", flat=True)
    assert list(scores) == [None] * 2


def test_solutions_are_labeling_work_with_provenance(hand_pool) -> None:
    from annotate.models import Completion, Solution, Step

    generation = hand_pool.run("convincing_wrong", 2)
    assert generation.number == 1 and generation.reward_model == hand_pool.prm
    a = hand_pool.candidates["a"]
    solution = Solution.objects.get(pk=type(a).objects.get(pk=a.pk).solution_id)
    assert (solution.campaign, solution.generation, solution.verifier_score, solution.is_correct,
            solution.final_answer, solution.pre_generated_steps) == (hand_pool.campaign, 1, 0.95, False, "-1", a.steps)
    assert solution.provenance == {
        "source": "active_learning", "generation": 1, "strategy": "convincing_wrong",
        "strategy_config": {"max_per_problem": 2}, "reason": "convincing_wrong", "rank": 0,
        "reward_model_id": hand_pool.prm.pk, "dataset_version_id": None, "candidate_id": a.pk,
        "pool_id": hand_pool.pool.pk, "score": 0.95}
    steps = list(Step.objects.filter(solution=solution).order_by("index").values_list("index", flat=True))
    assert steps == [0, 1, 2]
    assert list(Completion.objects.filter(step__solution=solution).order_by("step__index")
                .values_list("text", flat=True)) == a.steps
    assert solution.label_count == 0 and not solution.is_quality_control


def test_a_generation_never_reselects(hand_pool, tmp_path: Path) -> None:
    from annotate.services.campaign_problems import bank_access
    from annotate.services.problems import import_solutions
    from rewards.jobs.services.scoring import _write_input

    first = hand_pool.run("convincing_wrong", 2)
    assert _picked(hand_pool, first) == ["a", "b"]
    second = hand_pool.run("convincing_wrong", 2)
    assert second.number == 2 and _picked(hand_pool, second) == ["c", "f"]
    # The same steps of e, imported into the campaign by other means, make e already labeled.
    e = hand_pool.candidates["e"]
    path = tmp_path / "same.jsonl"
    path.write_text(json.dumps({"problem": e.pool_problem.problem.text, "steps": e.steps}) + "\n")
    with bank_access(SYSTEM):  # as a command would: the hand pool's problems sit in the bank
        import_solutions(path, hand_pool.campaign)
    third = hand_pool.run("convincing_wrong", 2)
    assert third.number == 3 and _picked(hand_pool, third) == ["g", "j"]
    # what the next scoring job would send to the scorer: only candidates still open
    from rewards.jobs.services.labeling_rounds import start_labeling_round

    fourth = start_labeling_round(hand_pool.campaign, strategy="uncertain", batch_size=1, user=SYSTEM)
    assert _write_input(fourth.scoring_job) == 4  # 11 - 6 selected - k (no steps)
    sent = [json.loads(line)["id"]
            for line in (Path(fourth.scoring_job.work_dir) / "input.jsonl").read_text().splitlines()]
    assert sorted(hand_pool.name_of(i) for i in sent) == ["d", "e", "h", "i"]

def test_one_scoring_generation_at_a_time_and_bad_input_names_the_field(hand_pool) -> None:
    from rewards.jobs.models import LabelingRound
    from rewards.jobs.services.labeling_rounds import start_labeling_round
    from rewards.jobs.services.training import JobInputError

    cases = [({"strategy": "convincing_rong", "batch_size": 2}, "^strategy: .*did you mean 'convincing_wrong'"),
             ({"strategy": "mixed", "batch_size": 2, "config": {"seed": -1}}, "^config: config key 'seed'"),
             ({"strategy": "mixed", "batch_size": 2, "config": {"convincing_share": 0.9}}, "^config: .*sum to 1"),
             ({"strategy": "random", "batch_size": 0}, "^batch_size: must be an integer >= 1"),
             ({"strategy": "random", "batch_size": 2, "config": []}, "^config: must be an object")]
    for kwargs, message in cases:
        with pytest.raises(JobInputError, match=message):
            start_labeling_round(hand_pool.campaign, **kwargs, user=SYSTEM)
    start_labeling_round(hand_pool.campaign, strategy="uncertain", batch_size=2, user=SYSTEM)
    with pytest.raises(JobInputError, match="^campaign: a generation of .* is still scoring"):
        start_labeling_round(hand_pool.campaign, strategy="uncertain", batch_size=2, user=SYSTEM)
    assert LabelingRound.objects.count() == 1


def test_best_prm_is_newest_version_then_most_accurate(hand_pool) -> None:
    from rewards.jobs.services.labeling_rounds import best_prm
    from tests.factories import DatasetVersionFactory
    from tests.labeling_rounds.conftest import make_prm

    v1, v2 = (DatasetVersionFactory(campaign=hand_pool.campaign, number=n, status="ready",
                                    content_sha256=f"{n}" * 8, folder=f"f{n}") for n in (1, 2))
    make_prm(hand_pool.campaign, auroc=0.99, version=v1, name="old but accurate")
    weak = make_prm(hand_pool.campaign, auroc=0.61, version=v2, name="v2 weak")
    strong = make_prm(hand_pool.campaign, auroc=0.64, version=v2, name="v2 strong")
    make_prm(hand_pool.campaign, auroc=None, version=v2, name="v2 no figure")
    assert best_prm(hand_pool.campaign) == strong
    generation = hand_pool.run("uncertain", 1)
    assert (generation.reward_model, generation.dataset_version) == (strong, v2)
    assert weak != strong


def test_provenance_and_verifier_score_round_trip_through_prm800k_export(hand_pool, make_user,
                                                                         tmp_path: Path, campaign_factory) -> None:
    from annotate.models import Role, Solution
    from annotate.services import labeling, leases
    from annotate.services.prm800k_import import import_prm800k
    from tests.factories import MembershipFactory

    generation = hand_pool.run("convincing_wrong", 2)
    labeler = make_user("lab-export")
    MembershipFactory(campaign=hand_pool.campaign, user=labeler, role=Role.LABELER)
    for value in (-1, 1):  # one labeling finds an error at step 0, the other accepts every step
        assignment = leases.lease_next_solution(hand_pool.campaign, labeler).assignment
        for index in range(3):
            if labeling.record_rating(assignment.pk, user=labeler, step_index=index, rating=value).found_error:
                break
        labeling.submit_assignment(assignment.pk, user=labeler)  # found_error after a −1, else solution
    out = tmp_path / "prm800k.jsonl"
    call_command("export_dataset", campaign=hand_pool.campaign.slug, format="prm800k", out=out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    chosen = {s.pre_generated_steps[0]: s for s in Solution.objects.filter(generation=generation.number)}
    for row in rows:
        solution = chosen[row["question"]["pre_generated_steps"][0]]
        assert row["generation"] == generation.number == solution.provenance["generation"]
        assert (row["question"]["pre_generated_verifier_score"] == solution.verifier_score
                == solution.provenance["score"])
        assert row["question"]["pre_generated_answer"] == "-1"
    assert sorted(r["label"]["finish_reason"] for r in rows) == ["found_error", "solution"]
    again = campaign_factory("reimported")
    import_prm800k(out, again)
    assert sorted(Solution.objects.filter(campaign=again).values_list("generation", "verifier_score")) == [
        (1, 0.90), (1, 0.95)]
