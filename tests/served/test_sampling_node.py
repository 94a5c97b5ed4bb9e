"""The sampler's node side for served models, without a server: the chat messages a sample or a rollout sends, the
``served`` backend's config, a token budget that stops a run with its finished rows kept, and a run started again
in the same folder continuing from them.

``ScriptedModel`` stands in for the language model only (as in tests/labeling_rounds/test_rollouts.py); the
budget, the resume, the row writing and the grading are the real code. The server itself is exercised in
test_sampling_served.py.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rewards.sampling import parse_config, parse_rollout_config
from rewards.sampling.rollouts import run_rollouts
from rewards.sampling.sampler import RawSample, SamplingStopped, run_sampling
from rewards.sampling.served import CONTINUE, chat_messages


class ScriptedModel:
    """Answers every prompt with a two-step solution reaching ``answer``; each sample costs 10 prompt tokens (once
    per request) and 5 completion tokens. Records the prompts and prefixes it was asked for."""

    def __init__(self, answer: str = "14") -> None:
        self.answer = answer
        self.calls: list[tuple[str, str]] = []

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]:
        self.calls.append((prompt, prefix))
        return [RawSample(text=f"Step {i}.\n# Answer\n\n{self.answer}", finish_reason="stop", prompt_tokens=10,
                          completion_tokens=5) for i in range(n)]


def test_a_sample_sends_the_prompt_and_a_rollout_its_prefix_and_the_request_to_go_on() -> None:
    assert chat_messages("Solve: 2+2") == [{"role": "user", "content": "Solve: 2+2"}]
    assert chat_messages("Solve: 2+2", "  We add.\nSo 4.\n") == [
        {"role": "user", "content": "Solve: 2+2"}, {"role": "assistant", "content": "We add.\nSo 4."},
        {"role": "user", "content": CONTINUE}]
    assert chat_messages("Solve: 2+2", "\n") == [{"role": "user", "content": "Solve: 2+2"}]


def test_the_served_backend_names_a_served_model_not_a_local_folder(tmp_path: Path) -> None:
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"problem": "p"}) + "\n")
    config = parse_config({"problems": str(problems), "output": str(tmp_path / "out.jsonl"), "backend": "served",
                           "model": "org/Qwen2.5-Math-7B-Instruct", "token_budget": 1000}, models_dir=tmp_path)
    assert config.model_path == Path() and config.generator_name == "org/Qwen2.5-Math-7B-Instruct"
    assert config.provenance()["token_budget"] == 1000 and config.provenance()["backend"] == "served"
    with pytest.raises(ValueError, match="token_budget"):
        parse_config({"problems": str(problems), "output": str(tmp_path / "o.jsonl"), "token_budget": 0})


def _problems(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps({"problem": f"Problem {i}: what is {i} + 10?", "unique_id": f"p{i}"}) + "\n"
                            for i in range(count)))
    return path


def _sample_config(tmp_path: Path, **extra: Any) -> Any:
    return parse_config({"problems": str(_problems(tmp_path, 4)), "output": str(tmp_path / "samples.jsonl"),
                         "n": 2} | extra)


def test_a_spent_budget_stops_sampling_a_requeued_run_stays_stopped_and_a_resumed_one_continues(tmp_path: Path) -> None:
    # one problem costs 10 + 2 * 5 = 20 tokens: a budget of 30 lets a second request start, never a third
    model = ScriptedModel()
    with pytest.raises(SamplingStopped, match=r"token budget spent: 40 of 30 tokens after 4 samples"):
        run_sampling(_sample_config(tmp_path, token_budget=30), model)
    partial = tmp_path / "samples.jsonl.partial"
    assert len(model.calls) == 2 and not (tmp_path / "samples.jsonl").exists()
    rows = [json.loads(line) for line in partial.read_text().splitlines()]
    assert [row["problem_id"] for row in rows] == ["p0", "p0", "p1", "p1"]

    with partial.open("a") as handle:  # a crash cut the next problem's first line
        handle.write('{"problem": "Problem 2: what is')
    # started again in its folder (a requeued attempt), the run counts on from the 40 tokens spent there: stopped
    requeued = ScriptedModel()
    with pytest.raises(SamplingStopped, match=r"token budget spent: 40 of 30 tokens after 4 samples"):
        run_sampling(_sample_config(tmp_path, token_budget=30), requeued)
    assert requeued.calls == []

    # a resumed job gets the finished rows in a folder of its own, and a budget of its own
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / partial.name).write_bytes(partial.read_bytes())
    again = ScriptedModel()
    summary = run_sampling(_sample_config(resumed, token_budget=30), again)
    assert [prompt.split("Problem: ")[1][:9] for prompt, _ in again.calls] == ["Problem 2", "Problem 3"]
    assert summary["resumed_problems"] == 2 and summary["written"] == 8 and summary["tokens_spent"] == 40
    rows = [json.loads(line) for line in (resumed / "samples.jsonl").read_text().splitlines()]
    assert [row["problem_id"] for row in rows] == ["p0", "p0", "p1", "p1", "p2", "p2", "p3", "p3"]


def test_a_spent_budget_stops_rollouts_and_a_second_run_labels_only_the_rest(tmp_path: Path) -> None:
    solutions = tmp_path / "solutions.jsonl"
    solutions.write_text("".join(json.dumps({"solution_id": i, "problem": f"What is {i} + 10?", "answer": "14",
                                             "steps": [f"First step of {i}.", "Then more.", "# Answer\n\n14"]}) + "\n"
                                 for i in (1, 2, 3)))
    config = {"solutions": str(solutions), "output": str(tmp_path / "mc.jsonl"), "rollouts": 2,
              "strategy": "every_step"}
    # a solution estimates two prefixes: 2 requests of 20 tokens; the budget lets solution 2 start, not finish
    model = ScriptedModel()
    with pytest.raises(SamplingStopped, match=r"token budget spent: 60 of 50 tokens after 1 of 3 solutions"):
        run_rollouts(parse_rollout_config(config | {"token_budget": 50}), model)
    lines = (tmp_path / "mc.jsonl.partial").read_text().splitlines()
    assert [json.loads(line)["solution_id"] for line in lines] == [1]
    assert json.loads(lines[0])["tokens_spent"] == 40
    requeued = ScriptedModel()  # started again in its folder, the run counts on from the 60 tokens spent there
    with pytest.raises(SamplingStopped, match=r"token budget spent: 60 of 50 tokens after 1 of 3 solutions"):
        run_rollouts(parse_rollout_config(config | {"token_budget": 50}), requeued)
    assert requeued.calls == []

    again = ScriptedModel()
    summary = run_rollouts(parse_rollout_config(config), again)
    assert {prefix.split("\n")[0] for _, prefix in again.calls} == {"First step of 2.", "First step of 3."}
    assert summary["solutions"] == 3 and summary["resumed_solutions"] == 1
    rows = [json.loads(line) for line in (tmp_path / "mc.jsonl").read_text().splitlines()]
    assert [row["solution_id"] for row in rows] == [1, 2, 3] and all(row["first_error"] is None for row in rows)
