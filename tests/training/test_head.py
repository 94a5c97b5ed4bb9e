"""The ``head`` method on real data: a logistic head on every label. The default recipe (``lexical``) reads no
backbone; the recipes that read one (here ``lexical+cosines``) encode each text once into a cache that PRM and ORM
share and scoring reuses. The PRM's calibrated first-error threshold travels with the model."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rewards.evaluation.intervals import step_level_intervals
from rewards.evaluation.step_metrics import first_error_index, processbench_metrics
from rewards.training import TrainingConfigError, load_reward_model, parse_config, run_training
from rewards.training.heads.features import orm_steps
from rewards.training.heads.fit import distinct_steps
from rewards.training.heads.spec import Recipe, resolved_method
from rewards.training.heads.tuning import TUNING_FOLDS
from rewards.training.modeling import ModelSpec
from rewards.training.scoring import HeadRewardModel, score_file
from tests.trained_models import write_jsonl

pytestmark = pytest.mark.training

#: real labeled solutions, few enough that encoding them stays a few seconds (texts of ≤ 64 tokens)
ROWS = 40
HEAD = {"base_model": "default", "method": "head", "max_length": 48, "negative_weight": "balanced", "seed": 0}
VECTORS = "lexical+cosines"  # the lexical head with the backbone's cosines: a recipe that reads the cache


@dataclass(frozen=True)
class Heads:
    cache: Path
    prm: Path
    orm: Path
    prm_metrics: dict[str, Any]
    orm_metrics: dict[str, Any]
    rows: list[dict[str, Any]]


def _train_heads(converted: tuple[list[dict[str, Any]], list[dict[str, Any]]], work: Path,
                 **job: Any) -> Heads:
    """A PRM, then an ORM on the same solutions (their steps joined by newlines, as the exporter writes them),
    both naming one feature cache."""
    usable = [r for r in converted[0] if not any("\n" in step for step in r["completions"])]
    rows = usable[:ROWS]
    # the validation split needs a correct and an erroneous solution for the threshold's calibration
    for correct in (True, False):
        if not any(r["split"] == "test" and all(r["labels"]) == correct for r in rows):
            rows.append(next(r for r in usable if r["split"] == "test" and all(r["labels"]) == correct))
    outcome = [{"prompt": r["prompt"], "completion": "\n".join(r["completions"]), "label": all(r["labels"]),
                "split": r["split"], "problem_id": r["problem_id"]} for r in rows]
    prm_file, orm_file = write_jsonl(work / "prm.jsonl", rows), write_jsonl(work / "orm.jsonl", outcome)
    cache = work / "cache"
    metrics = {kind: run_training(parse_config({**HEAD, **job, "kind": kind, "dataset": str(path),
                                                "output_dir": str(work / kind), "feature_cache": str(cache)}))
               for kind, path in (("prm", prm_file), ("orm", orm_file))}
    return Heads(cache, work / "prm", work / "orm", metrics["prm"], metrics["orm"], rows)


@pytest.fixture(scope="module")
def heads(converted: tuple[list[dict[str, Any]], list[dict[str, Any]]],
          tmp_path_factory: pytest.TempPathFactory) -> Heads:
    """PRM and ORM heads on a recipe that reads the backbone's vectors, through one cache."""
    return _train_heads(converted, tmp_path_factory.mktemp("heads"), head_features=VECTORS)


@pytest.fixture(scope="module")
def lexical_heads(converted: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                  tmp_path_factory: pytest.TempPathFactory) -> Heads:
    """PRM and ORM heads on the default recipe, which reads no backbone."""
    return _train_heads(converted, tmp_path_factory.mktemp("lexical-heads"))


def test_prm_and_orm_share_one_cache_built_once(heads: Heads) -> None:
    texts = {r["prompt"] for r in heads.rows} | {s for r in heads.rows for s in r["completions"]}
    prm, orm = heads.prm_metrics["data"]["features"], heads.orm_metrics["data"]["features"]
    assert prm["computed"] == prm["texts"] == len(texts)  # every distinct text encoded once, by the PRM
    assert orm["computed"] == 0 and orm["texts"] == len(texts)  # the ORM read them all from the cache
    assert prm["cache"] == orm["cache"] and Path(prm["cache"]).parent == heads.cache
    assert heads.prm_metrics["model"]["backbone"] == heads.orm_metrics["model"]["backbone"] is not None
    # one part from the PRM's training; one more at most from its sanity checks, which score new texts (the steps
    # with a harmless prefix) through the same cache
    assert 1 <= len(list(Path(prm["cache"]).glob("part-*.npz"))) <= 2


def test_head_learns_from_every_label_and_reports(heads: Heads) -> None:
    metrics = heads.prm_metrics
    labeled = sum(len(r["labels"]) for r in heads.rows if r["split"] == "train")
    train = metrics["data"]["train"]
    assert metrics["method"] == "head" and train["steps"] + train["repeated_steps"] == labeled
    assert train["negative_steps"] > 0 and train["positive_steps"] > 0
    validation = metrics["validation"]
    # figures, not a quality claim on 40 solutions (bench/reward_quality.py measures quality on all the labels)
    assert 0 <= validation["step_level"]["auroc"] <= 1 and validation["solution_level"]["count"] > 0
    assert validation["step_level"]["count"] == sum(len(r["labels"]) for r in heads.rows if r["split"] == "test")
    events = [json.loads(line)["event"] for line in (heads.prm / "events.jsonl").read_text().splitlines()]
    assert events[0] == "start" and "features" in events and events[-1] == "done"
    assert (heads.prm / "head.npz").is_file() and not (heads.prm / "model.safetensors").exists()


def test_calibrated_threshold_is_stored_and_used_by_scoring(lexical_heads: Heads, tmp_path: Path) -> None:
    heads = lexical_heads
    validation = heads.prm_metrics["validation"]
    threshold = validation["threshold"]
    assert threshold is not None and 0 < threshold < 1
    calibration = validation["calibration"]  # chosen on the training problems' out-of-fold scores
    train_problems = {r["problem_id"] for r in heads.rows if r["split"] == "train"}
    assert calibration["source"] == "training problems, cross-fitted" and calibration["threshold"] == threshold
    assert calibration["problems"] == len(train_problems)
    assert calibration["folds"] == min(TUNING_FOLDS, len(train_problems))  # the tuning's folds
    assert calibration["f1_calibrated"] >= calibration["f1_at_default"]  # where F1 peaks on those scores
    spec = ModelSpec.load(heads.prm)
    assert spec.method == "head" and spec.threshold == threshold
    model = load_reward_model(heads.prm)
    assert isinstance(model, HeadRewardModel) and model.threshold == threshold
    source = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "prompt": r["prompt"], "completions": r["completions"]}
                                                 for i, r in enumerate(heads.rows[:12])])
    assert score_file(model, source, tmp_path / "out.jsonl") == 12
    for line in (tmp_path / "out.jsonl").read_text().splitlines():
        row = json.loads(line)
        assert row["threshold"] == threshold
        assert row["first_error"] == first_error_index(row["step_scores"], threshold)


def test_the_threshold_is_chosen_on_the_training_problems_not_the_scored_split(
        lexical_heads: Heads, tmp_path: Path) -> None:
    """The held-out split is what the compare scores: a threshold chosen there would be judged on the data that
    chose it. The same training rows with other held-out labels give the same threshold, and the held-out F1 is
    the one at that threshold."""
    held = [{k: v for k, v in r.items() if k != "ratings"} for r in lexical_heads.rows if r["split"] == "test"]
    rows = [r for r in lexical_heads.rows if r["split"] == "train"]
    rows += [dict(r, labels=[False] * len(r["labels"])) for r in held]  # every held-out step wrong ...
    rows += [dict(r, completions=r["completions"][:1], labels=[True]) for r in held]  # ... and a right one each
    metrics = run_training(parse_config({**HEAD, "kind": "prm", "dataset": str(write_jsonl(tmp_path / "p.jsonl", rows)),
                                         "output_dir": str(tmp_path / "prm")}))
    validation, before = metrics["validation"], lexical_heads.prm_metrics["validation"]
    assert validation["threshold"] == before["threshold"] and validation["calibration"] == before["calibration"]
    held = [r for r in rows if r["split"] == "test"]
    model = load_reward_model(tmp_path / "prm")
    scores = [model.score_steps(r["prompt"], r["completions"]) for r in held]
    first_errors = [next((i for i, lab in enumerate(r["labels"]) if not lab), -1) for r in held]
    expected = processbench_metrics(first_errors, step_scores=scores, threshold=validation["threshold"])["f1"]
    assert validation["f1_calibrated"] == pytest.approx(expected)
    # its intervals are over the held-out problems, reproducible from the saved model's scores, and the gain over
    # 0.5 is paired: the difference of the two F1s, drawn from the same problems
    ratings = [[1 if lab else -1 for lab in r["labels"]] for r in held]
    again = step_level_intervals(scores, ratings, groups=[r["problem_id"] for r in held],
                                 threshold=validation["threshold"], seed=0)
    intervals = validation["intervals"]
    assert intervals["problems"] == len({r["problem_id"] for r in held}) and intervals["unit"] == "problems"
    for name in ("first_error_f1", "first_error_f1_calibrated", "first_error_f1_gain", "step_auroc"):
        assert intervals[name] == pytest.approx(again[name], abs=1e-6)
    gain = intervals["first_error_f1_gain"]
    assert gain["value"] == pytest.approx(validation["f1_calibrated"] - validation["f1_at_default"])
    assert gain["low"] <= gain["value"] <= gain["high"]


def test_with_one_training_problem_the_threshold_comes_from_the_validation_split(
        lexical_heads: Heads, tmp_path: Path) -> None:
    """Cross-fitting needs two training problems; with one, the threshold is calibrated on the validation rows
    and the metrics say so."""
    rows = [dict(r, problem_id="one") if r["split"] == "train" else r for r in lexical_heads.rows]
    metrics = run_training(parse_config({**HEAD, "kind": "prm", "dataset": str(write_jsonl(tmp_path / "p.jsonl", rows)),
                                         "output_dir": str(tmp_path / "prm")}))
    validation = metrics["validation"]
    assert validation["calibration"] == {"source": "validation split"} and 0 < validation["threshold"] < 1
    assert validation["f1_calibrated"] >= validation["f1_at_default"]  # chosen where F1 peaks on these rows
    assert ModelSpec.load(tmp_path / "prm").threshold == validation["threshold"]


def test_a_batch_scores_each_distinct_step_once_as_its_row_alone_would(lexical_heads: Heads) -> None:
    """Rated alternatives repeat their chosen prefix: a batch scores each step in its context once, and every row
    gets the scores it would get alone."""
    model = load_reward_model(lexical_heads.prm)
    items = [(r["prompt"], list(r["completions"])) for r in lexical_heads.rows[:12]]
    items += [(prompt, [*steps[:-1], "A different last step: 2 + 2 = 5."]) for prompt, steps in items if len(steps) > 1]
    picks, where = distinct_steps(items)
    assert len(picks) == len({(prompt, tuple(steps[:i + 1])) for prompt, steps in items for i in range(len(steps))})
    assert [len(positions) for positions in where] == [len(steps) for _, steps in items]
    batch = model.score_steps_batch(items)
    for (prompt, steps), scores in zip(items, batch, strict=True):
        assert scores == pytest.approx(model.score_steps(prompt, steps), abs=1e-6)
    alternatives = batch[12:]
    originals = [scores for (_, steps), scores in zip(items[:12], batch[:12], strict=True) if len(steps) > 1]
    assert all(a[:-1] == o[:-1] for a, o in zip(alternatives, originals, strict=True))  # the shared prefix


def test_saved_heads_load_and_score_from_the_cache(heads: Heads) -> None:
    prm, orm = load_reward_model(heads.prm), load_reward_model(heads.orm)
    row = heads.rows[-1]
    steps = prm.score_steps(row["prompt"], row["completions"])
    assert len(steps) == len(row["completions"]) and all(0 < s < 1 for s in steps)
    assert prm.score_solution(row["prompt"], row["completions"]) == pytest.approx(math.prod(steps))
    text = "\n".join(row["completions"])
    assert orm.score_solution(row["prompt"], text) == orm.score_solution(row["prompt"], orm_steps(text))
    assert isinstance(prm, HeadRewardModel) and isinstance(orm, HeadRewardModel)
    assert prm.scorer.cache.computed == 0 and orm.scorer.cache.computed == 0  # training's vectors, reused
    fresh = prm.score_steps(row["prompt"], ["A step no one has written before: 2 + 2 = 5."])
    assert len(fresh) == 1 and prm.scorer.cache.computed == 1


def test_the_default_recipe_reads_no_backbone(lexical_heads: Heads) -> None:
    """``lexical`` trains, saves and scores from the texts alone: no vector is encoded, no cache folder is made,
    and the saved head names its recipe."""
    import numpy as np

    for metrics in (lexical_heads.prm_metrics, lexical_heads.orm_metrics):
        assert metrics["model"]["features"] == "lexical"
        assert metrics["data"]["features"]["computed"] == 0 and metrics["data"]["features"]["cache"] is None
        assert metrics["model"]["backbone"] is None
    assert not lexical_heads.cache.exists()
    events = [json.loads(line)["event"] for line in (lexical_heads.prm / "events.jsonl").read_text().splitlines()]
    assert "features" not in events and events[-1] == "done"
    assert ModelSpec.load(lexical_heads.prm).feature_cache is None
    with np.load(lexical_heads.prm / "head.npz", allow_pickle=False) as saved:
        assert str(saved["features"]) == "lexical"
    prm, orm = load_reward_model(lexical_heads.prm), load_reward_model(lexical_heads.orm)
    assert isinstance(prm, HeadRewardModel) and isinstance(orm, HeadRewardModel)
    assert prm.scorer.cache is None and orm.scorer.cache is None
    row = lexical_heads.rows[-1]
    right = prm.score_steps(row["prompt"], [row["completions"][0], "So $6 \\times 255 = 1530$."])
    wrong = prm.score_steps(row["prompt"], [row["completions"][0], "So $6 \\times 255 = 1520$."])
    assert right[0] == wrong[0] and right[1] != wrong[1] and all(0 < s < 1 for s in right + wrong)
    assert 0 < orm.score_solution(row["prompt"], "\n".join(row["completions"])) < 1
    assert not lexical_heads.cache.exists()


def test_a_lexical_head_saved_before_the_recipe_marker_reads_the_cosines(heads: Heads, tmp_path: Path) -> None:
    """A lexical head saved without its recipe (when the default still read the backbone's cosines) scores with
    those cosines, exactly as before."""
    import shutil

    import numpy as np

    folder = tmp_path / "saved-before"
    shutil.copytree(heads.prm, folder)
    with np.load(folder / "head.npz", allow_pickle=False) as saved:
        assert str(saved["features"]) == VECTORS
        arrays = {name: saved[name] for name in saved.files if name not in ("features", "head_format")}
    np.savez(folder / "head.npz", **arrays)
    import dataclasses

    dataclasses.replace(ModelSpec.load(folder), features="lexical").save(folder)  # what such a model's spec says
    before, now = load_reward_model(folder), load_reward_model(heads.prm)
    assert isinstance(before, HeadRewardModel) and before.scorer.recipe is Recipe(VECTORS)
    assert before.scorer.cache is not None
    row = heads.rows[0]
    assert before.score_steps(row["prompt"], row["completions"]) == now.score_steps(row["prompt"], row["completions"])


def test_auto_is_the_head_on_a_cpu() -> None:
    assert resolved_method("head") == "head" and resolved_method("finetune") == "finetune"
    import torch

    assert resolved_method("auto") == ("finetune" if torch.cuda.is_available() else "head")


def test_method_keys_in_a_job_file(stepwise_file: Path) -> None:
    base = {"kind": "prm", "base_model": "default", "output_dir": "out", "dataset": str(stepwise_file)}
    assert parse_config(base).method == "finetune"  # a job file from before keeps fine-tuning
    assert parse_config({**base, "method": "lora"}).lora is not None
    with pytest.raises(TrainingConfigError) as refused:
        parse_config({**base, "method": "head", "lora": True})
    assert refused.value.key == "lora"
    with pytest.raises(TrainingConfigError) as refused:
        parse_config({**base, "method": "sgd"})
    assert refused.value.key == "method"


def test_mlp_head_with_text_features_trains_saves_and_scores_on_the_shared_cache(heads: Heads,
                                                                                   tmp_path: Path) -> None:
    """The MLP over the vectors plus the steps' text features: PRM and ORM read the cache the linear heads
    filled (nothing encoded again), save plain arrays, and score through the same loader."""
    import numpy as np

    from rewards.training.heads.features import step_features
    from rewards.training.heads.models import MlpHead
    from rewards.training.heads.persistence import load_head
    from rewards.training.textfeatures import NAMES

    mlp = {**HEAD, "head_features": "context+text", "head_model": "mlp", "max_steps": 5,
           "feature_cache": str(heads.cache)}
    metrics = {}
    for kind, rows in (("prm", heads.rows), ("orm", None)):
        source = tmp_path / f"{kind}.jsonl"
        if rows is None:  # the ORM's solutions: the PRM rows' steps joined, as in the fixture
            rows = [{"prompt": r["prompt"], "completion": "\n".join(r["completions"]), "label": all(r["labels"]),
                     "split": r["split"], "problem_id": r["problem_id"]} for r in heads.rows]
        write_jsonl(source, rows)
        metrics[kind] = run_training(parse_config({**mlp, "kind": kind, "dataset": str(source),
                                                   "output_dir": str(tmp_path / f"{kind}-mlp")}))
        assert metrics[kind]["data"]["features"]["computed"] == 0  # the linear heads' vectors, reused
        assert metrics[kind]["model"]["head"] == "mlp" and metrics[kind]["train"]["steps"] <= 5
        with np.load(tmp_path / f"{kind}-mlp" / "head.npz", allow_pickle=False) as saved:  # plain arrays only
            assert {"hidden_weight", "hidden_bias", "coef", "intercept", "mean", "scale"} <= set(saved.files)
    prm_folder, orm_folder = tmp_path / "prm-mlp", tmp_path / "orm-mlp"
    head = load_head(prm_folder)
    assert isinstance(head, MlpHead)
    width = head.hidden_weight.shape[0]
    row = heads.rows[0]
    cache = load_reward_model(heads.prm).scorer.cache
    cache.ensure([row["prompt"], *row["completions"]])  # read from the cache's files: nothing is encoded
    assert width == step_features(cache, row["prompt"], row["completions"], Recipe.CONTEXT_TEXT).shape[1]
    spec = ModelSpec.load(prm_folder)
    assert spec.features == "context+text" and spec.threshold == metrics["prm"]["validation"]["threshold"]
    prm, orm = load_reward_model(prm_folder), load_reward_model(orm_folder)
    first = row["completions"][0]
    right = prm.score_steps(row["prompt"], [first, "So $6 \\times 255 = 1530$."])
    wrong = prm.score_steps(row["prompt"], [first, "So $6 \\times 255 = 1520$."])
    assert len(right) == 2 and all(0 < s < 1 for s in right + wrong) and right[0] == wrong[0]
    assert isinstance(prm, HeadRewardModel)
    # the columns end with the text features, then "an earlier step failed the check"
    column = width - 1 - len(NAMES) + NAMES.index("any_wrong")
    for step, failed in (("So $6 \\times 255 = 1530$.", 0.0), ("So $6 \\times 255 = 1520$.", 1.0)):
        assert step_features(prm.scorer.cache, row["prompt"], [first, step], Recipe.CONTEXT_TEXT)[1, column] == failed
    assert 0 < orm.score_solution(row["prompt"], "\n".join(row["completions"])) < 1


def test_lexical_head_saves_its_vocabulary_and_scores_as_it_was_fitted(lexical_heads: Heads) -> None:
    """The default recipe: a linear head over the steps' dense columns and their word n-grams, with boosted trees
    beside it. The saved vocabularies, IDF weights and trees rebuild the same columns: the loaded head scores
    exactly as a fit of the same examples does, and the words change the score."""
    import numpy as np

    from rewards.training.data import read_dataset, split_rows, with_neutral_answers
    from rewards.training.heads.features import prm_examples, step_features
    from rewards.training.heads.fit import head_scores
    from rewards.training.heads.lexical import LexicalHead
    from rewards.training.heads.models import DEFAULT_ITERATIONS
    from rewards.training.heads.persistence import TREES_FILE, load_head
    from rewards.training.rows import dedupe_step_labels

    heads = lexical_heads
    assert ModelSpec.load(heads.prm).features == "lexical" and heads.prm_metrics["model"]["features"] == "lexical"
    with np.load(heads.prm / "head.npz", allow_pickle=False) as saved:  # plain arrays, the vocabulary as text
        assert saved["vocabulary"].dtype.kind == "U" and saved["tree_vocabulary"].dtype.kind == "U"
        assert saved["vocabulary"].size == saved["idf"].size == saved["word_coef"].size > 0
    assert (heads.prm / TREES_FILE).read_text().startswith("tree\n")  # LightGBM's text format, no pickle
    assert heads.prm_metrics["model"]["head"] == "linear+trees" and heads.prm_metrics["train"]["trees"] > 0
    loaded = load_head(heads.prm)
    assert isinstance(loaded, LexicalHead) and loaded.trees is not None
    trees = heads.prm_metrics["train"]["tuning"]["trees"]["chosen"]  # the settings the job chose
    # the rows as the head read them: answer lines in the neutral form (the default)
    train, _ = split_rows(with_neutral_answers(read_dataset(heads.prm.parent / "prm.jsonl", "prm", "positive")),
                          None, 0)
    examples = prm_examples(dedupe_step_labels(train)[0],
                            [step_features(None, row.prompt, row.steps, Recipe.LEXICAL) for row in train])
    fitted, _ = LexicalHead.fit(examples.x, examples.texts, examples.y, contexts=examples.contexts,
                                negative_weight="balanced", iterations=DEFAULT_ITERATIONS, seed=0, trees=True,
                                regularisation=heads.prm_metrics["train"]["regularisation"],
                                tree_weight=trees["weight"], tree_leaves=trees["leaves"])
    assert list(fitted.vocabulary) == list(loaded.vocabulary)
    assert fitted.trees is not None and list(fitted.trees.vocabulary) == list(loaded.trees.vocabulary)
    np.testing.assert_allclose(head_scores(loaded, examples.x, examples.texts),
                               fitted.predict(examples.x, examples.texts), rtol=1e-5)
    strongest = str(loaded.vocabulary[int(np.argmax(np.abs(loaded.word_coef)))])
    with_word, without = loaded.predict(examples.x[:2], [strongest, ""])
    assert with_word != without


def test_sibling_pairs_stay_within_a_context_and_are_capped() -> None:
    import numpy as np

    from rewards.training.heads.lexical import SIBLING_PAIRS_PER_CONTEXT, sibling_pairs

    contexts = ["a", "a", "a", "b", "b", "c"]
    y = np.array([1, 0, 0, 1, 1, 0])
    better, worse = sibling_pairs(contexts, y, seed=0)
    assert sorted(zip(better.tolist(), worse.tolist(), strict=True)) == [(0, 1), (0, 2)]  # "b": no negative
    crowded = ["p"] * 20  # 10 correct and 10 wrong solutions to one problem: 100 pairs
    labels = np.array([1, 0] * 10)
    first = sibling_pairs(crowded, labels, seed=3)
    assert len(first[0]) == SIBLING_PAIRS_PER_CONTEXT < 100
    assert all(labels[a] == 1 and labels[b] == 0 for a, b in zip(*first, strict=True))
    np.testing.assert_array_equal(sibling_pairs(crowded, labels, seed=3)[0], first[0])  # seeded


def test_lexical_head_learns_from_sibling_contrasts() -> None:
    """Alternatives rated at one point differ by a word: "halve" is rated right and "double" wrong. Single
    steps elsewhere say the opposite as often, so each word alone is right half the time. Without the contexts
    the head cannot rank the two; with them it learns the siblings' contrast, and reports the pairs."""
    import numpy as np

    from rewards.training.heads.lexical import LexicalHead
    from rewards.training.heads.models import DEFAULT_ITERATIONS

    texts, labels, contexts = [], [], []
    for index in range(30):
        for word, label, context in (("halve", 1, f"alternatives {index}"), ("double", 0, f"alternatives {index}"),
                                     ("halve", 0, f"alone {index}"), ("double", 1, f"alone {index} again")):
            texts.append(f"then we {word} it")
            labels.append(label)
            contexts.append(context)
    y = np.array(labels)
    x = np.zeros((len(y), 1), np.float32)
    margins, pairs = {}, {}
    for with_contexts in (False, True):
        head, fit = LexicalHead.fit(x, texts, y, contexts=contexts if with_contexts else None,
                                    negative_weight="balanced", iterations=DEFAULT_ITERATIONS, seed=0)
        halve, double = head.predict(x[:2], ["then we halve it", "then we double it"])
        margins[with_contexts], pairs[with_contexts] = halve - double, fit["sibling_pairs"]
    assert pairs == {False: 0, True: 30}
    assert abs(margins[False]) < 0.01 and margins[True] > 0.05


def test_a_lexical_head_saved_before_punctuation_loads_as_it_was(heads: Heads, tmp_path: Path) -> None:
    """A head.npz without the token pattern and the text marks (saved before they existed) splits texts as it
    did: words and operators only, no marks."""
    import numpy as np

    from rewards.training.heads.lexical import LEGACY_LEXICAL_TOKENS, LexicalHead
    from rewards.training.heads.persistence import load_head

    with np.load(heads.prm / "head.npz", allow_pickle=False) as saved:
        legacy_names = set(saved.files) - {"head_format", "tokens", "marks", "tree_vocabulary"}
        arrays = {name: saved[name] for name in legacy_names}
    arrays["vocabulary"] = np.array(["halve", "double", "halve it"])
    arrays["idf"], arrays["word_coef"] = np.ones(3, np.float32), np.array([1.0, -1.0, 0.5], np.float32)
    np.savez(tmp_path / "head.npz", **arrays)
    legacy = load_head(tmp_path)
    assert isinstance(legacy, LexicalHead) and legacy.tokens == LEGACY_LEXICAL_TOKENS and not legacy.marks
    words = legacy._words(["halve it?", "double"]).toarray()
    assert words[0].tolist() == pytest.approx([2 ** -0.5, 0.0, 2 ** -0.5]) and words[1].tolist() == [0, 1, 0]


def test_lexical_recipe_is_refused_with_the_mlp(stepwise_file: Path) -> None:
    base = {"kind": "prm", "base_model": "default", "output_dir": "out", "dataset": str(stepwise_file),
            "method": "head"}
    assert parse_config(base).head_features == "lexical"  # the default
    with pytest.raises(TrainingConfigError) as refused:
        parse_config({**base, "head_model": "mlp"})
    assert refused.value.key == "head_model" and "lexical" in str(refused.value)
    with pytest.raises(TrainingConfigError) as refused:
        parse_config({**base, "head_model": "mlp", "head_features": "lexical+cosines"})
    assert refused.value.key == "head_model" and "lexical+cosines" in str(refused.value)
    assert parse_config({**base, "head_model": "mlp", "head_features": "context+text"}).head_model == "mlp"


def test_boosted_trees_learn_what_one_weight_per_column_cannot() -> None:
    """"The answer is" is wrong late in a solution and right early; a computation the other way round. Each word
    and the position alone are right half the time, so the regression cannot rank them; the trees beside it read
    the word and the position together."""
    import numpy as np

    from rewards.training.heads.lexical import LexicalHead
    from rewards.training.heads.models import DEFAULT_ITERATIONS

    texts, labels, positions = [], [], []
    for index in range(100):
        for words, late in (("the answer is", 0), ("the answer is", 1), ("we compute", 0), ("we compute", 1)):
            texts.append(f"{words} {index % 7}")
            positions.append(late)
            labels.append(int((words == "the answer is") != bool(late)))
    x, y = np.array(positions, np.float32)[:, None], np.array(labels)
    probe_x = np.array([[0], [1], [0], [1]], np.float32)
    probe = ["the answer is 3", "the answer is 3", "we compute 3", "we compute 3"]
    right = np.array([1, 0, 0, 1], bool)  # what the labels say of the probes
    for trees in (False, True):
        head, fit = LexicalHead.fit(x, texts, y, negative_weight="balanced", iterations=DEFAULT_ITERATIONS,
                                    seed=0, trees=trees)
        scores = head.predict(probe_x, probe)
        margin = scores[right].min() - scores[~right].max()
        if trees:
            assert margin > 0.1 and fit["trees"] > 0 and head.parameters > head.coef.size + head.word_coef.size + 1
        else:
            assert abs(margin) < 0.05 and "trees" not in fit and head.trees is None


def test_a_lexical_head_saved_before_the_trees_scores_with_its_regression_alone(lexical_heads: Heads,
                                                                                tmp_path: Path) -> None:
    import shutil

    import numpy as np

    from rewards.training.heads.lexical import LexicalHead
    from rewards.training.heads.persistence import TREES_FILE, load_head

    folder = tmp_path / "before-trees"
    shutil.copytree(lexical_heads.prm, folder)
    with np.load(folder / "head.npz", allow_pickle=False) as saved:
        np.savez(folder / "head.npz", **{name: saved[name] for name in saved.files if name != "tree_vocabulary"})
    (folder / TREES_FILE).unlink()
    before, now = load_head(folder), load_head(lexical_heads.prm)
    assert isinstance(before, LexicalHead) and before.trees is None
    assert isinstance(now, LexicalHead) and now.trees is not None
    x = np.zeros((1, now.coef.size), np.float32)
    text = ["So the answer is $42$."]
    linear = now.intercept + ((x - now.mean) / now.scale) @ now.coef + now._words(text) @ now.word_coef
    np.testing.assert_allclose(before.predict(x, text), 1 / (1 + np.exp(-linear)), rtol=1e-6)
    assert now.predict(x, text) != pytest.approx(before.predict(x, text))  # the trees move it


def test_the_head_model_follows_the_recipe_unless_named(stepwise_file: Path) -> None:
    base = {"kind": "prm", "base_model": "default", "output_dir": "out", "dataset": str(stepwise_file),
            "method": "head"}
    assert parse_config(base).head_model == "linear+trees"
    assert parse_config({**base, "head_features": "lexical+cosines"}).head_model == "linear+trees"
    assert parse_config({**base, "head_features": "context"}).head_model == "linear"
    assert parse_config({**base, "head_model": "linear"}).head_model == "linear"  # the regression alone
    assert parse_config(base).resolved()["head_model"] == "linear+trees"  # a repeat of the job trains the same
    with pytest.raises(TrainingConfigError) as refused:
        parse_config({**base, "head_model": "linear+trees", "head_features": "context+text"})
    assert refused.value.key == "head_model" and "context+text" in str(refused.value)
