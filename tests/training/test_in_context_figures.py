"""The held-out figures that say how sure the step AUROC is: AUROC over distinct (problem, prefix, step) triples and
sibling-pair accuracy, in ``metrics.json`` of both methods; and the sanity checks of a trained PRM."""
from __future__ import annotations

import pytest

from rewards.training.data import IGNORE_INDEX
from rewards.training.figures import in_context_figures
from tests.trained_models import TrainedRun

pytestmark = pytest.mark.training


def test_a_repeated_prefix_counts_once_and_siblings_are_compared_in_their_context() -> None:
    """Two rows share the prefix "a" (an alternatives export): its step counts once. After "a", "b" (right)
    and "c" (wrong) are siblings; "b" scores higher, so the one pair is ordered right, although the wrong "c"
    outscores the right "a" (which the plain AUROC would count against the model)."""
    figures = in_context_figures(["p", "p"], [["a", "b"], ["a", "c"]], [[0.5, 0.9], [0.5, 0.6]], [[1, 1], [1, 0]])
    assert figures["step_level_distinct"] == {"count": 3, "auroc": 0.5}
    assert figures["sibling_pair_accuracy"] == {"accuracy": 1.0, "pairs": 1, "contexts": 1}
    wrong_way = in_context_figures(["p", "p"], [["a", "b"], ["a", "c"]], [[0.5, 0.1], [0.5, 0.6]], [[1, 1], [1, 0]])
    assert wrong_way["sibling_pair_accuracy"]["accuracy"] == 0.0


def test_an_unlabeled_step_is_left_out_and_one_class_gives_no_auroc() -> None:
    figures = in_context_figures(["p"], [["a", "b"]], [[0.2, 0.9]], [[IGNORE_INDEX, 1]])
    assert figures["step_level_distinct"] == {"count": 1, "auroc": None}
    assert figures["sibling_pair_accuracy"]["pairs"] == 0


def test_the_fine_tuned_prm_reports_them(trained_prm: TrainedRun) -> None:
    validation = trained_prm.metrics["validation"]
    distinct = validation["step_level_distinct"]
    assert 0 < distinct["count"] <= validation["step_level"]["count"] and 0.0 <= distinct["auroc"] <= 1.0
    siblings = validation["sibling_pair_accuracy"]
    assert siblings["pairs"] > 0 and 0.0 <= siblings["accuracy"] <= 1.0


def test_the_fine_tuned_prm_reports_its_sanity_checks(trained_prm: TrainedRun) -> None:
    """``rewards.evaluation.sanity`` run on the validation solutions as written, after the model was saved."""
    sanity = trained_prm.metrics["sanity"]
    assert set(sanity) == {"answer_rewrite", "harmless_prefix", "shuffle", "last_step_lowest"}
    assert sanity["harmless_prefix"]["n"] > 0 and sanity["shuffle"]["n"] > 0
    assert -1.0 <= sanity["shuffle"]["spearman"] <= 1.0
    assert sanity["last_step_lowest"]["n"] > 0 and 0.0 <= sanity["last_step_lowest"]["data_rate"] <= 1.0
