"""The typed reads of stored JSON: a file or an evaluation from an older Steplab still reads, a broken section is
left out rather than failing the page."""
from __future__ import annotations

from rewards.jobs.contracts import EvaluationResults, training_metrics
from rewards.jobs.models import EvaluationRun


def test_an_evaluation_without_an_orm_and_with_a_broken_section_reads() -> None:
    run = EvaluationRun(results={"ns": [1, 4], "problems": 12, "methods": {"prm": {"4": {"mean": 0.5, "std": 0.1}},
                                                                           "orm": None},
                                 "exact": {"orm": None, "pass": {"4": 0.9}}, "domains": "not a mapping"})
    results = EvaluationResults.of(run)
    assert (results.largest_n, results.problems, set(results.methods), results.exact) == (
        "4", 12, {"prm"}, {"pass": {"4": 0.9}})
    assert results.domains == {} and results.draws is None and results.paired == {}


def test_training_metrics_from_before_the_method_key_and_with_a_broken_section() -> None:
    old = training_metrics({"train": {"loss": 0.25}, "validation": {"step_level": {"auroc": 0.7}}}, "prm")
    assert old is not None and (old.kind, old.method, old.train.loss) == ("prm", "finetune", 0.25)
    broken = training_metrics({"method": "head", "train": {"loss": "n/a"}, "data": {"train": {"steps": 9}}}, "prm")
    assert broken is not None and broken.train is None and broken.data.train.steps == 9
    assert training_metrics({}, "orm") is None
