"""Quality metrics: hand-computed small cases, the reference implementations' numbers, and the DB path."""
from __future__ import annotations

import math
import random

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from annotate.models import CampaignMetrics, FinishReason, Membership
from annotate.services import agreement
from annotate.services.agreement import (
    cohen_kappa,
    first_error_agreement,
    fleiss_kappa,
    krippendorff_alpha_ordinal,
    percentile,
)
from tests.factories import finished_labeling, numbered_solution

# --- pure functions ------------------------------------------------------------------------------------------

def test_cohen_kappa_hand_case_and_sklearn() -> None:
    pairs = [("a", "a"), ("a", "b"), ("b", "b"), ("b", "b"), ("a", "a")]
    # observed 4/5; rater 1 a=3/5, rater 2 a=2/5: expected .6*.4 + .4*.6 = .48 -> (.8-.48)/.52
    result = cohen_kappa(pairs)
    assert result.items == 5
    assert result.value == pytest.approx(0.32 / 0.52)
    assert result.value == pytest.approx(cohen_kappa_score([a for a, _ in pairs], [b for _, b in pairs]))


def test_cohen_kappa_matches_sklearn_on_random_data() -> None:
    rng = random.Random(7)
    for _ in range(20):
        n = rng.randint(5, 60)
        first = [rng.choice(["found_error", "solution"]) for _ in range(n)]
        second = [f if rng.random() < 0.7 else rng.choice(["found_error", "solution"]) for f in first]
        if len(set(first + second)) < 2:
            continue
        pairs = list(zip(first, second, strict=True))
        assert cohen_kappa(pairs).value == pytest.approx(cohen_kappa_score(first, second))


def test_fleiss_kappa_hand_case() -> None:
    # P_i = 1, 1/3, 1 -> P̄ = 7/9; p = 5/9, 4/9 -> Pe = 41/81; kappa = (63-41)/(81-41) = 0.55
    result = fleiss_kappa([["a", "a", "a"], ["a", "a", "b"], ["b", "b", "b"]])
    assert result.value == pytest.approx(0.55)
    assert result.items == 3


def test_fleiss_equals_cohen_style_two_raters_unanimous() -> None:
    assert fleiss_kappa([["a", "a"], ["b", "b"]]).value == pytest.approx(1.0)
    assert fleiss_kappa([["a"]]).items == 0


def test_alpha_hand_case() -> None:
    # Only −1 and +1 observed: the ordinal distance is constant, so alpha is nominal alpha:
    # n=8 pairable values (+1: 5, −1: 3), 2 off-diagonal coincidences -> 1 - 7*2/(2*5*3) = 8/15.
    result = krippendorff_alpha_ordinal([[1, 1], [1, -1], [-1, -1], [1, 1], [0]])
    assert result.items == 4
    assert result.value == pytest.approx(8 / 15)


def test_alpha_matches_the_package_on_rater_matrices() -> None:
    """Our value-count path against the package's own rater × unit reliability matrix (with missing values)."""
    rng = np.random.default_rng(3)
    for _ in range(10):
        raters, units = 4, 30
        truth = rng.choice([-1, 0, 1], size=units)
        data = np.where(rng.random((raters, units)) < 0.75, truth, rng.choice([-1, 0, 1], size=(raters, units)))
        data = data.astype(float)
        data[rng.random((raters, units)) < 0.3] = np.nan
        reference = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal", value_domain=[-1, 0, 1])
        per_unit = [[int(v) for v in data[:, u] if not math.isnan(v)] for u in range(units)]
        ours = krippendorff_alpha_ordinal(per_unit)
        assert ours.value == pytest.approx(reference)
        assert ours.items == sum(len(u) >= 2 for u in per_unit)


def test_alpha_undefined_without_variation() -> None:
    assert krippendorff_alpha_ordinal([[1, 1], [1, 1]]).value is None
    assert krippendorff_alpha_ordinal([[1]]).items == 0


def test_first_error_agreement_pairs() -> None:
    # solution 1: 3 pairs (2,2) (2,3) (2,3) -> 1 exact, 3 within one; solution 2: (-1, 0) -> none
    exact = first_error_agreement([[2, 2, 3], [-1, 0], [5]])
    near = first_error_agreement([[2, 2, 3], [-1, 0], [5]], tolerance=1)
    assert (exact.value, exact.items) == (pytest.approx(1 / 4), 2)
    assert near.value == pytest.approx(3 / 4)


def test_percentiles() -> None:
    assert percentile([1000, 2000, 3000, 4000], 50) == 2500
    assert percentile([1000, 2000, 3000, 4000], 90) == pytest.approx(3700)
    assert percentile([], 50) is None


# --- from the database ---------------------------------------------------------------------------------------

@pytest.fixture
def scored_campaign(campaign_factory, member, last_week):
    campaign = campaign_factory("quality", overlap=2, quality_threshold=0.6, quality_min_items=3)
    a, b = member(campaign, "ann"), member(campaign, "bob")
    s1 = numbered_solution(campaign, 4, is_quality_control=True, gold_first_error=2)
    s2 = numbered_solution(campaign, 3, is_quality_control=True, gold_first_error=-1)
    s3 = numbered_solution(campaign, 4, is_quality_control=True, gold_first_error=0)
    finished_labeling(s1, a, [1, 1, -1], finished_at=last_week, total_time_ms=1000, step_time_ms=100)
    finished_labeling(s2, a, [1, 0, 1], total_time_ms=2000, step_time_ms=200)
    finished_labeling(s3, a, [1, -1], total_time_ms=3000, step_time_ms=300)
    finished_labeling(s1, b, [1, -1], total_time_ms=4000)
    finished_labeling(s2, b, [1, 1, -1])
    finished_labeling(s3, b, [1], FinishReason.GIVE_UP)
    return campaign, a, b


@pytest.mark.django_db
def test_gold_agreement_per_labeler(scored_campaign) -> None:
    campaign, a, b = scored_campaign
    by_labeler = agreement.gold_agreement_by_labeler(agreement.load_labelings(campaign))
    ann, bob = by_labeler[a.pk], by_labeler[b.pk]
    assert (ann.step_accuracy.value, ann.step_accuracy.items) == (pytest.approx(6 / 7), 7)
    assert (ann.first_error_exact.value, ann.first_error_within_one.value) == (pytest.approx(2 / 3), 1.0)
    assert (ann.verdict_accuracy.value, ann.verdict_accuracy.items) == (1.0, 3)
    assert (bob.step_accuracy.value, bob.step_accuracy.items) == (0.5, 6)
    assert bob.first_error_exact.value == 0.0
    assert bob.first_error_within_one.value == pytest.approx(1 / 3)
    assert (bob.verdict_accuracy.value, bob.verdict_accuracy.items) == (0.5, 2)


@pytest.mark.django_db
def test_inter_annotator_on_overlapped_solutions(scored_campaign) -> None:
    campaign, _, _ = scored_campaign
    result = agreement.inter_annotator_agreement(agreement.load_labelings(campaign).labelings)
    assert result.overlapped_solutions == 3
    units = [[1, 1], [1, -1], [1, 1], [0, 1], [1, -1], [1, 1]]  # pairable steps, hand-listed
    reference = krippendorff.alpha(reliability_data=np.array(units, dtype=float).T, level_of_measurement="ordinal",
                                   value_domain=[-1, 0, 1])
    assert result.alpha_ordinal.items == 6
    assert result.alpha_ordinal.value == pytest.approx(reference)
    pairs_first, pairs_second = ["found_error", "solution"], ["found_error", "found_error"]
    assert result.cohen_kappa_verdict.items == 2
    assert result.cohen_kappa_verdict.value == pytest.approx(cohen_kappa_score(pairs_first, pairs_second))
    assert (result.first_error_exact.value, result.first_error_exact.items) == (0.0, 2)
    assert result.first_error_within_one.value == pytest.approx(0.5)


@pytest.mark.django_db
def test_snapshot_flags_and_pauses_low_quality_labelers(scored_campaign) -> None:
    campaign, a, b = scored_campaign
    campaign.pause_below_threshold = True
    campaign.save()
    metrics = agreement.compute_campaign_metrics(campaign)
    assert metrics.data["flagged"] == [b.pk]
    ann = Membership.objects.get(campaign=campaign, user=a)
    bob = Membership.objects.get(campaign=campaign, user=b)
    assert ann.quality_flagged_at is None and not ann.is_paused
    assert bob.quality_flagged_at is not None and bob.is_paused
    assert CampaignMetrics.objects.get(campaign=campaign).data["labelings"] == 6
    time = metrics.data["time"]
    assert time["per_solution_ms"] == {"median": 2500.0, "p90": pytest.approx(3700.0), "items": 4}
    assert time["per_step_ms"]["items"] == 3 + 3 + 2  # ann's rated steps carry times
    over_time = metrics.data["quality_over_time"][str(a.pk)]
    assert [(w["value"], w["items"]) for w in over_time] == [(1.0, 1), (0.5, 2)]


@pytest.mark.django_db
def test_threshold_needs_enough_gold_items(scored_campaign) -> None:
    campaign, _, b = scored_campaign
    campaign.quality_min_items = 4
    campaign.save()
    agreement.compute_campaign_metrics(campaign)
    assert Membership.objects.get(campaign=campaign, user=b).quality_flagged_at is None
