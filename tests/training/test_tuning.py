"""The head's settings (L2 strength, n-gram min_df, the trees' leaves and share, the MLP's width and dropout) are
chosen on the training problems alone, by grouped cross-validation, and the saved head uses them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rewards.training import parse_config, run_training
from rewards.training.heads.features import Examples
from rewards.training.heads.fit import fit_head, head_scores
from rewards.training.heads.lexical import LEXICAL_MIN_DF, LEXICAL_REGULARISATION, TREE_LEAVES, TREE_WEIGHT, LexicalHead
from rewards.training.heads.models import MLP_DROPOUT, MlpHead
from rewards.training.heads.persistence import TREES_FILE, load_head
from rewards.training.heads.spec import HeadModel, HeadSpec, Recipe
from rewards.training.heads.tuning import (
    MIN_DF_GRID,
    MLP_DROPOUT_GRID,
    MLP_HIDDEN_GRID,
    REGULARISATION_GRID,
    TREE_LEAVES_GRID,
    TREE_WEIGHT_GRID,
    TUNING_FOLDS,
    choose_settings,
)

pytestmark = pytest.mark.training

GOLDEN = Path(__file__).parent / "golden"
LEXICAL_TREES = HeadSpec(Recipe.LEXICAL, HeadModel.LINEAR_TREES)


def _train(tmp_path: Path, kind: str, name: str, rows: list[str]) -> dict[str, Any]:
    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(rows), encoding="utf-8")
    return run_training(parse_config({"kind": kind, "dataset": str(data), "base_model": "default",
                                      "method": "head", "negative_weight": "balanced", "seed": 0,
                                      "output_dir": str(tmp_path / name)}))


def _without_half_the_validation_rows(kind: str) -> tuple[list[str], list[str]]:
    rows = (GOLDEN / f"{kind}.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    held = [row for row in rows if json.loads(row)["split"] == "test"]
    assert held
    return rows, [row for row in rows if row not in held[: len(held) // 2]]


def _best(means: dict[str, float]) -> str:
    return max(means, key=means.__getitem__)


def _examples(count: int, problems: int, *, separable: bool, seed: int = 0) -> Examples:
    """Synthetic examples, ``count // problems`` per problem: with ``separable`` a word tells the label exactly
    (every setting ranks them perfectly), else a dense column and a word each tell it in part."""
    rng = np.random.default_rng(seed)
    y = (np.arange(count) % 2).astype(np.int64)
    rng.shuffle(y)
    x = rng.normal(size=(count, 3)).astype(np.float32)
    if separable:
        texts = [f"{'good' if label else 'bad'} step {rng.integers(50)}" for label in y]
    else:
        x[:, 0] += 0.8 * y
        texts = [f"{'good' if rng.random() < 0.35 + 0.3 * label else 'bad'} step {rng.integers(50)} "
                 f"{'then' if rng.random() < 0.5 else 'so'}" for label in y]
    groups = np.array([f"problem {i % problems}" for i in range(count)], dtype=object)
    return Examples(x, texts, y, groups, [f"{groups[i]} context {i}" for i in range(count)])


def test_the_choices_are_the_best_fold_scores_and_the_validation_rows_play_no_part(tmp_path: Path) -> None:
    rows, fewer = _without_half_the_validation_rows("orm")
    train = {name: _train(tmp_path, "orm", name, chosen)["train"] for name, chosen in (("all", rows),
                                                                                        ("fewer", fewer))}
    tuning = train["all"]["tuning"]
    assert tuning == train["fewer"]["tuning"]
    means = tuning["mean_auroc"]
    assert set(means) == {str(c) for c in REGULARISATION_GRID} and tuning["folds"] == TUNING_FOLDS
    assert tuning["chosen"] == float(_best(means)) == train["all"]["regularisation"]
    trees = tuning["trees"]
    assert set(trees["mean_auroc"]) == {str(n) for n in TREE_LEAVES_GRID}
    blends = {(int(n), float(w)): mean for n, by_weight in trees["mean_auroc"].items()
              for w, mean in by_weight.items()}
    assert {w for _, w in blends} == set(TREE_WEIGHT_GRID)
    assert blends[trees["chosen"]["leaves"], trees["chosen"]["weight"]] == max(blends.values())


def test_a_prm_s_settings_and_threshold_come_from_its_training_problems_and_its_saved_head_uses_them(
        tmp_path: Path) -> None:
    rows, fewer = _without_half_the_validation_rows("prm")
    metrics = {name: _train(tmp_path, "prm", name, chosen) for name, chosen in (("all", rows), ("fewer", fewer))}
    tuning = metrics["all"]["train"]["tuning"]
    assert tuning == metrics["fewer"]["train"]["tuning"]
    calibration = metrics["all"]["validation"]["calibration"]
    assert calibration == metrics["fewer"]["validation"]["calibration"]
    assert calibration["folds"] == TUNING_FOLDS  # the tuning's out-of-fold scores, no fit of its own
    chosen = tuning["trees"]["chosen"]
    head = load_head(tmp_path / "all")
    assert isinstance(head, LexicalHead) and head.tree_weight == chosen["weight"]
    assert (head.trees is None) == (chosen["weight"] == 0)
    if head.trees is not None:
        assert f"[num_leaves: {chosen['leaves']}]" in (tmp_path / "all" / TREES_FILE).read_text(encoding="utf-8")
    # scoring blends at the saved share: the loaded head's P(correct) is the blend of its two parts at it
    steps = [json.loads(row)["completions"][0] for row in rows[:20]]
    x = np.zeros((len(steps), head.mean.size), np.float32)
    linear = head.linear_log_odds(x, steps)
    expected = linear if head.trees is None else (1 - chosen["weight"]) * linear + chosen["weight"] * \
        head.trees.log_odds(x, steps)
    assert np.allclose(head.predict(x, steps), 1 / (1 + np.exp(-expected)))


def test_a_tie_keeps_every_default() -> None:
    examples = _examples(1800, 90, separable=True)  # 1,200 texts per fit: min_df applies and is tuned
    tuned = choose_settings(LEXICAL_TREES, examples, negative_weight="balanced", iterations=None, seed=0)
    assert tuned.record is not None
    assert set(tuned.record["mean_auroc"].values()) == {1.0} and tuned.record["chosen"] == LEXICAL_REGULARISATION
    assert tuned.record["min_df"] == {"chosen": LEXICAL_MIN_DF,
                                      "mean_auroc": {str(m): 1.0 for m in MIN_DF_GRID}}
    blends = [m for by_weight in tuned.record["trees"]["mean_auroc"].values() for m in by_weight.values()]
    assert set(blends) == {1.0} and tuned.record["trees"]["chosen"] == {"leaves": TREE_LEAVES, "weight": TREE_WEIGHT}
    assert (tuned.spec.regularisation, tuned.spec.min_df, tuned.spec.tree_weight, tuned.spec.tree_leaves) == (
        LEXICAL_REGULARISATION, LEXICAL_MIN_DF, TREE_WEIGHT, TREE_LEAVES)


def test_the_out_of_fold_scores_are_a_head_with_the_chosen_settings_fitted_without_the_problem() -> None:
    examples = _examples(900, 45, separable=False)
    tuned = choose_settings(LEXICAL_TREES, examples, negative_weight="balanced", iterations=None, seed=0)
    assert tuned.crossfit is not None and not np.isnan(tuned.crossfit.scores).any()
    folds = np.array([tuned.crossfit.fold_of[g] for g in examples.groups])
    assert len(set(folds)) == TUNING_FOLDS
    for problem in set(examples.groups):  # a problem's examples all in one fold
        assert len(set(folds[examples.groups == problem])) == 1
    for fold in range(TUNING_FOLDS):
        held = examples.subset(folds == fold)
        head, _ = fit_head(tuned.spec, examples.subset(folds != fold), negative_weight="balanced",
                           iterations=None, seed=0)
        assert not set(held.groups) & set(examples.groups[folds != fold])
        assert np.allclose(tuned.crossfit.scores[folds == fold], head_scores(head, held.x, held.texts))


def test_the_mlp_s_width_and_dropout_are_chosen_and_fitted() -> None:
    examples = _examples(600, 30, separable=False)
    spec = HeadSpec(Recipe.CONTEXT, HeadModel.MLP)
    tuned = choose_settings(spec, examples, negative_weight="balanced", iterations=5, seed=0)
    assert tuned.record is not None and "chosen" not in tuned.record  # no L2 strength for the MLP
    width, dropout = tuned.record["mlp_hidden"], tuned.record["mlp_dropout"]
    assert set(width["mean_auroc"]) == {str(h) for h in MLP_HIDDEN_GRID}
    assert set(dropout["mean_auroc"]) == {str(d) for d in MLP_DROPOUT_GRID}
    assert width["mean_auroc"][str(width["chosen"])] == max(width["mean_auroc"].values())
    assert dropout["mean_auroc"][str(dropout["chosen"])] == max(dropout["mean_auroc"].values())
    assert dropout["mean_auroc"][str(MLP_DROPOUT)] == width["mean_auroc"][str(width["chosen"])]  # the fits reused
    head, _ = fit_head(tuned.spec, examples, negative_weight="balanced", iterations=5, seed=0)
    assert isinstance(head, MlpHead) and head.hidden_weight.shape[1] == width["chosen"]
