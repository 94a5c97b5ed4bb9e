"""Dataset reading and sequence building with the real MiniLM tokenizer (no model weights needed)."""
from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewards.training.data import (
    IGNORE_INDEX,
    PrmRow,
    RewardCollator,
    TrainingDataError,
    encode_orm,
    encode_prm,
    read_dataset,
    split_rows,
    step_labels,
    tokenize_texts,
)
from rewards.training.modeling import choose_separator, sequence_layout
from rewards.training.rows import dedupe_step_labels
from rewards.training.train import encode_prm_rows

PROMPT = "What is $1 + 1$?"
STEPS = ["First, add the two ones together.", "That gives 2.\n\n# Answer\n\n2"]


@pytest.fixture(scope="module")
def layout(minilm_tokenizer: Any) -> Any:
    token, added = choose_separator(minilm_tokenizer)
    assert (token, added) == ("[SEP]", False)
    return sequence_layout(minilm_tokenizer, token)


def _encode(tokenizer: Any, layout: Any, prompt: str, steps: list[str], labels: list[int] | None,
            max_length: int, first_step: int = 0) -> Any:
    return encode_prm(layout, tokenize_texts(tokenizer, [prompt])[0], tokenize_texts(tokenizer, steps), labels,
                      max_length, first_step=first_step)


def test_layout_is_cls_prompt_sep_steps(minilm_tokenizer: Any, layout: Any) -> None:
    assert layout.prefix_ids == (minilm_tokenizer.cls_token_id,)
    assert layout.separator_id == minilm_tokenizer.sep_token_id
    encoded = _encode(minilm_tokenizer, layout, PROMPT, STEPS, [1, 0], 512)
    ids, labels = encoded.input_ids, encoded.labels
    separators = [i for i, t in enumerate(ids) if t == layout.separator_id]
    assert len(separators) == 1 + len(STEPS)  # after the prompt, then after every step
    assert encoded.label_positions == separators[1:]
    assert [labels[p] for p in separators[1:]] == [1, 0]
    assert all(label == IGNORE_INDEX for i, label in enumerate(labels) if i not in separators[1:])
    pieces = [ids[a + 1:b] for a, b in pairwise(separators)]
    assert pieces == tokenize_texts(minilm_tokenizer, STEPS)
    assert not encoded.overlong and encoded.end_step == 2


def test_newline_separator_would_vanish_and_literal_sep_stays_text(minilm_tokenizer: Any, layout: Any) -> None:
    assert tokenize_texts(minilm_tokenizer, ["\n"]) == [[]]  # why "\n" cannot be the separator
    encoded = _encode(minilm_tokenizer, layout, PROMPT, ["I type [SEP] here.", "Done."], [1, 1], 512)
    assert encoded.input_ids.count(layout.separator_id) == 3


def test_long_prompt_is_cut_from_the_left_and_labels_survive(minilm_tokenizer: Any, layout: Any) -> None:
    prompt = " ".join(f"word{i}" for i in range(300))
    encoded = _encode(minilm_tokenizer, layout, prompt, STEPS, [1, 0], 64)
    assert len(encoded.input_ids) <= 64 and encoded.overlong and encoded.end_step == 2
    assert [encoded.labels[p] for p in encoded.label_positions] == [1, 0]
    prompt_ids = tokenize_texts(minilm_tokenizer, [prompt])[0]
    first_sep = encoded.input_ids.index(layout.separator_id)
    kept = encoded.input_ids[1:first_sep]
    assert kept and kept == prompt_ids[len(prompt_ids) - len(kept):]


def test_steps_that_do_not_fit_are_dropped_from_the_end_and_counted(minilm_tokenizer: Any, layout: Any) -> None:
    steps = [f"Step number {i} adds {i} to the running total of the sum." for i in range(30)]
    labels = [1] * 29 + [0]
    encoded = _encode(minilm_tokenizer, layout, PROMPT, steps, labels, 128)
    assert len(encoded.input_ids) <= 128 and encoded.overlong
    assert 0 < encoded.end_step < 30
    assert len(encoded.label_positions) == encoded.end_step
    assert all(encoded.input_ids[p] == layout.separator_id for p in encoded.label_positions)
    assert sum(label != IGNORE_INDEX for label in encoded.labels) == encoded.end_step

    rows = [PrmRow(PROMPT, tuple(steps), tuple(labels), "train", "p1"),
            PrmRow(PROMPT, tuple(STEPS), (1, 0), "train", "p2")]
    features, counts = encode_prm_rows(rows, minilm_tokenizer, layout, 128)
    assert counts["overlong"] == 1 and counts["dropped_steps"] == 30 - encoded.end_step
    assert counts["steps"] == encoded.end_step + 2 and counts["negative_steps"] == 1
    assert len(features) == counts["rows_used"] == 2

    neutral_only = PrmRow(PROMPT, tuple(STEPS), (IGNORE_INDEX, IGNORE_INDEX), "train", "p3")  # "exclude": no loss
    features, counts = encode_prm_rows([rows[1], neutral_only], minilm_tokenizer, layout, 128)
    assert counts["rows_used"] == len(features) == 1 and counts["excluded_steps"] == 2


def test_a_single_huge_step_keeps_its_tail_and_label(minilm_tokenizer: Any, layout: Any) -> None:
    huge = " ".join(f"t{i}" for i in range(400)) + " the end"
    encoded = _encode(minilm_tokenizer, layout, PROMPT, [huge], [0], 32)
    assert len(encoded.input_ids) == 32 and encoded.overlong and encoded.end_step == 1
    assert encoded.labels[-1] == 0 and encoded.input_ids[-1] == layout.separator_id
    assert encoded.input_ids[-3:-1] == tokenize_texts(minilm_tokenizer, ["the end"])[0]


def test_scoring_windows_cover_every_step(minilm_tokenizer: Any, layout: Any) -> None:
    steps = [f"Line {i}: we compute {i} times {i}." for i in range(40)]
    covered: list[int] = []
    first = 0
    while first < len(steps):
        window = _encode(minilm_tokenizer, layout, PROMPT, steps, None, 96, first_step=first)
        assert len(window.input_ids) <= 96 and window.end_step > first
        covered += range(window.first_step, window.end_step)
        first = window.end_step
    assert covered == list(range(40))
    # the first window is exactly the training layout
    assert _encode(minilm_tokenizer, layout, PROMPT, steps, None, 96).input_ids == \
        _encode(minilm_tokenizer, layout, PROMPT, steps, [1] * 40, 96).input_ids


def test_orm_keeps_the_end_of_the_solution(minilm_tokenizer: Any, layout: Any) -> None:
    prompt_ids = tokenize_texts(minilm_tokenizer, [PROMPT])[0]
    completion_ids = tokenize_texts(minilm_tokenizer, ["filler " * 200 + "# Answer 2"])[0]
    ids, cut = encode_orm(layout, prompt_ids, completion_ids, 64)
    assert cut and len(ids) == 64 and ids[0] == layout.prefix_ids[0] and ids[-1] == layout.separator_id
    assert ids[-1 - len(completion_ids[-3:]):-1] == completion_ids[-3:]
    short, cut = encode_orm(layout, prompt_ids, completion_ids[:5], 64)
    assert not cut and short.count(layout.separator_id) == 2


def test_neutral_policies() -> None:
    assert step_labels([1, 0, -1], "positive") == (1, 1, 0)
    assert step_labels([1, 0, -1], "negative") == (1, 0, 0)
    assert step_labels([1, 0, -1], "exclude") == (1, IGNORE_INDEX, 0)


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


ROW = {"prompt": "p", "completions": ["a", "b", "c"], "labels": [True, True, False], "ratings": [1, 0, -1],
       "split": "train", "problem_id": "x", "solution_id": 1}


def test_labels_are_recomputed_from_ratings(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", [ROW, {k: v for k, v in ROW.items() if k != "ratings"}])
    assert [r.labels for r in read_dataset(path, "prm", "positive")] == [(1, 1, 0), (1, 1, 0)]
    assert [r.labels for r in read_dataset(path, "prm", "exclude")] == [(1, IGNORE_INDEX, 0), (1, 1, 0)]
    assert read_dataset(path, "prm", "negative")[0].labels == (1, 0, 0)


@pytest.mark.parametrize(("bad", "message"), [
    ({**ROW, "labels": [True, False]}, r"line 2: field 'labels' must be a list of booleans, one per step"),
    ({**ROW, "ratings": [1, 2, 0]}, r"line 2: field 'ratings' must be a list of -1/0/1"),
    ({**ROW, "completions": []}, r"line 2: field 'completions' must be a non-empty list"),
    ({k: v for k, v in ROW.items() if k != "prompt"}, r"line 2: field 'prompt' is missing"),
    ({**ROW, "split": "dev"}, r"line 2: field 'split' must be 'train' or 'test'"),
    ("{not json", r"line 2: not valid JSON"),
])
def test_bad_prm_rows_name_file_line_and_field(tmp_path: Path, bad: Any, message: str) -> None:
    path = _write(tmp_path / "bad.jsonl", [ROW, bad])
    with pytest.raises(TrainingDataError, match=f"{tmp_path}/bad.jsonl {message}"):
        read_dataset(path, "prm")


def test_parquet_rows_and_orm_errors(tmp_path: Path) -> None:
    rows = [{"prompt": "p", "completion": "a\nb", "label": True, "split": "test", "problem_id": "x", "solution_id": 1},
            {"prompt": "p", "completion": "a", "label": None, "split": "train", "problem_id": "y", "solution_id": 2}]
    pq.write_table(pa.Table.from_pylist(rows[:1]), tmp_path / "ok.parquet")
    assert read_dataset(tmp_path / "ok.parquet", "orm")[0].label == 1
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "bad.parquet")
    with pytest.raises(TrainingDataError, match=r"bad.parquet row 2: field 'label' is missing"):
        read_dataset(tmp_path / "bad.parquet", "orm")


def test_eval_fraction_splits_by_problem() -> None:
    rows = [PrmRow("p", ("a",), (1,), "train", f"problem{i // 3}") for i in range(300)]
    train, held = split_rows(rows, 0.2, seed=0)
    assert len(train) + len(held) == 300 and 30 <= len(held) <= 90
    assert not {r.problem_id for r in train} & {r.problem_id for r in held}
    by_column = split_rows([PrmRow("p", ("a",), (1,), s, None) for s in ("train", "test", None)], None, 0)
    assert [len(part) for part in by_column] == [2, 1]


def test_collator_pads_with_ignore_index() -> None:
    batch = RewardCollator(pad_id=0)([{"input_ids": [5, 6, 7], "labels": [-100, -100, 1]},
                                      {"input_ids": [5, 8], "labels": [-100, 0]}])
    assert batch["input_ids"].tolist() == [[5, 6, 7], [5, 8, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[-100, -100, 1], [-100, 0, -100]]
    outcome = RewardCollator(0)([{"input_ids": [1], "labels": 1}, {"input_ids": [1, 2], "labels": 0}])
    assert outcome["labels"].tolist() == [1, 0]


def test_repeated_step_labels_are_trained_once() -> None:
    """An alternatives export repeats the chosen prefix in each alternative's row: its labels count once."""
    chosen = PrmRow("p", ("a", "b", "c"), (1, 1, 1), None, None)
    alternative = PrmRow("p", ("a", "b", "x"), (1, 1, 0), None, None)
    disagreeing = PrmRow("p", ("a", "b"), (1, 0), None, None)  # another labeler's other verdict is kept
    other_problem = PrmRow("q", ("a",), (1,), None, None)
    rows, repeated = dedupe_step_labels([chosen, alternative, disagreeing, other_problem])
    assert [r.labels for r in rows] == [(1, 1, 1), (IGNORE_INDEX, IGNORE_INDEX, 0), (IGNORE_INDEX, 0), (1,)]
    assert repeated == 3 and rows[0] is chosen and rows[3] is other_problem


def test_a_steps_window_does_not_depend_on_the_steps_after_it(minilm_tokenizer: Any, layout: Any) -> None:
    """What a step's separator can attend to (its window up to that separator) is the same whether the solution
    ends there or goes on: a causal PRM cannot read, from how much of the prompt was cut, how much solution is
    still to come. An alternatives row ends at its rated alternative, so that would say "this step is last"."""
    prompt = " ".join(f"word{i}" for i in range(120))
    steps = [f"Step {i}: we add {i} to the running total, which is now {i * (i + 1) // 2}." for i in range(12)]

    def seen_by(steps_given: list[str], step: int) -> list[int]:
        first = 0
        while True:
            window = _encode(minilm_tokenizer, layout, prompt, steps_given, None, 96, first_step=first)
            if window.first_step <= step < window.end_step:
                return window.input_ids[:window.label_positions[step - first] + 1]
            first = window.end_step

    for step in range(len(steps)):
        assert seen_by(steps[:step + 1], step) == seen_by(steps, step), step
    first = _encode(minilm_tokenizer, layout, prompt, steps, None, 96)
    assert first.overlong and 0 < first.end_step < len(steps)  # the prompt was cut and the windows moved on
