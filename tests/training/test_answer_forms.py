"""A head reads maths, not format: PRM800K's ``# Answer`` block, ``\\boxed{}`` and "the answer is" are put into one
neutral form before training and scoring, so a trained PRM or ORM scores the three alike; a model trained on them
as written (or saved before the rewrite) still reads them as written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rewards.training import load_reward_model, parse_config, run_training
from rewards.training.heads.features import step_features
from rewards.training.heads.spec import Recipe
from rewards.training.modeling import SPEC_FILE, ModelSpec
from rewards.training.textfeatures import neutral_answers

FORMS = ("# Answer\n5", "The answer is 5", "\\boxed{5}")
PROBLEM = "What is $2 + 3$?"


def test_the_three_answer_forms_read_alike() -> None:
    assert {neutral_answers(form) for form in FORMS} == {"answer 5"}
    assert neutral_answers("So the final answer is $\\boxed{\\frac{1}{2}}$.") == "So answer \\frac{1}{2}."
    assert neutral_answers("Exactly.\n\n# Answer\n\n468") == "Exactly.\n\nanswer 468"
    rows = [step_features(None, PROBLEM, ["We add 2 and 3.", neutral_answers(form)], Recipe.LEXICAL) for form in FORMS]
    assert all(np.array_equal(rows[0], row) for row in rows[1:])
    raw = [step_features(None, PROBLEM, ["We add 2 and 3.", form], Recipe.LEXICAL) for form in FORMS]
    assert not all(np.array_equal(raw[0], row) for row in raw[1:])  # as written, the columns tell them apart


def _rows() -> tuple[list[dict], list[dict]]:
    """Sums, each solved right (every step +1, ending in a ``# Answer`` block) and wrong (a wrong sum, −1, then a
    boxed answer): as written, the answer format alone separates them."""
    prm, orm = [], []
    for a in range(2, 32):
        b = a + 3
        for wrong in (False, True):
            total = a + b + (7 if wrong else 0)
            last = f"\\boxed{{{total}}}" if wrong else f"# Answer\n\n{total}"
            steps = [f"We need {a} + {b}.", f"Adding gives {total}.", last]
            split = "test" if a % 5 == 0 else "train"
            prm.append({"prompt": f"What is ${a} + {b}$?", "completions": steps, "labels": [True, not wrong, not wrong],
                        "split": split, "problem_id": str(a)})
            orm.append({"prompt": f"What is ${a} + {b}$?", "completion": "\n".join(steps), "label": not wrong,
                        "split": split, "problem_id": str(a)})
    return prm, orm


@pytest.mark.parametrize("answers", ["neutral", "as written"])
def test_a_trained_head_scores_the_three_answer_forms_alike_unless_trained_as_written(tmp_path: Path,
                                                                                       answers: str) -> None:
    prm_rows, orm_rows = _rows()
    scores = {}
    for kind, rows in (("prm", prm_rows), ("orm", orm_rows)):
        data = tmp_path / f"{kind}.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows))
        run_training(parse_config({"kind": kind, "dataset": str(data), "base_model": "default", "method": "head",
                                   "output_dir": str(tmp_path / kind), "answers": answers}))
        model = load_reward_model(tmp_path / kind)
        assert model.spec.answers == answers
        solutions = [["We need 40 + 43.", "Adding gives 83.", form.replace("5", "83")] for form in FORMS]
        if kind == "prm":
            scores[kind] = [model.score_steps(PROBLEM, steps)[-1] for steps in solutions]
        else:
            scores[kind] = [model.score_solution(PROBLEM, "\n".join(steps)) for steps in solutions]
    for kind in ("prm", "orm"):
        alike = max(scores[kind]) - min(scores[kind]) < 1e-9
        assert alike == (answers == "neutral"), (kind, scores[kind])


def test_a_model_saved_before_the_rewrite_reads_answers_as_written(tmp_path: Path) -> None:
    spec = ModelSpec(kind="prm", separator_token="", aggregation="product", neutral="positive", base_model="x",
                     max_length=64, lora=False, method="head")
    spec.save(tmp_path)
    data = json.loads((tmp_path / SPEC_FILE).read_text())
    data.pop("answers")
    (tmp_path / SPEC_FILE).write_text(json.dumps(data))
    assert ModelSpec.load(tmp_path).answers == "as written"
