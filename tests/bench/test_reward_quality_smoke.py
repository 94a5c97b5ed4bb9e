"""The reward-quality benches run end to end at a tiny size and end in their JSON line: a head PRM and ORM trained
in seconds on sixty labeled solutions, a dozen ProcessBench items per subset, a few MMLU-Pro questions per domain,
and ``bench/assist.py`` (it once died on an argument the trainer reads) with one Monte-Carlo solution of one
rollout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.training_files import tiny_training_files

ROOT = Path(__file__).resolve().parents[2]
PROCESSBENCH = Path("/work/shared/data/processbench/math.json")


def _run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not PROCESSBENCH.exists(), reason="ProcessBench is not in ../shared")
def test_reward_quality_reports_on_the_report_half_with_intervals(tmp_path: Path) -> None:
    doc = _run("reward_quality.py", "--datasets", str(tiny_training_files(tmp_path)), "--pool-size", "0",
               "--processbench-limit", "24", "--draws", "50")
    assert doc["bench"] == "reward_quality" and doc["aggregation"]["aggregation"] in ("min", "product")
    for subset in ("math", "gsm8k"):
        figures = doc["processbench"][subset]
        assert figures["items"] + figures["dev_items"] == 24 and figures["items"] > 0 and figures["dev_items"] > 0
        model = figures["figures"]["model"]["first_error_f1"]
        assert model["low"] <= model["value"] <= model["high"]
        # every baseline twice: its choices from the training rows, and chosen on the dev half (random once)
        assert set(figures["figures"]["baselines"]) == {"length", "step_length", "position", "random",
                                                        "length@dev half", "step_length@dev half",
                                                        "position@dev half"}
        assert set(doc["targets"][subset]) == {"first_error_f1", "flawed_auroc"}
        sanity = figures["sanity"]
        assert sanity["harmless_prefix"]["n"] > 0 and sanity["shuffle"]["n"] > 0
        assert sanity["last_step_lowest"]["n"] <= figures["items"]


def test_domain_quality_runs_on_a_few_questions(tmp_path: Path) -> None:
    doc = _run("domain_quality.py", "--datasets", str(tiny_training_files(tmp_path)), "--questions", "3",
               "--trials", "20")
    assert doc["bench"] == "domain_quality" and doc["aggregation"]["aggregation"] in ("min", "product")
    math = doc["domains"]["math (headroom pool)"]
    assert math["questions"] == 3 and math["percent"]["prm"]["1"]["low"] <= math["percent"]["prm"]["1"]["high"]


@pytest.mark.skipif(not PROCESSBENCH.exists(), reason="ProcessBench is not in ../shared")
def test_assist_runs_with_a_tiny_prm_and_one_rollout(tmp_path: Path) -> None:
    from rewards.training import parse_config, run_training

    datasets = tiny_training_files(tmp_path)
    run_training(parse_config({"kind": "prm", "dataset": str(datasets / "prm.jsonl"),
                               "output_dir": str(tmp_path / "prm"), "method": "head", "max_steps": 50,
                               "base_model": "default"}))
    doc = _run("assist.py", "--prm", str(tmp_path / "prm"), "--mc-solutions", "1", "--rollouts", "1",
               "--max-new-tokens", "8", "--prm-solutions", "8", "--trials", "5")
    assert doc["bench"] == "assist" and doc["recipe"]["method"] == "head"
    assert doc["prm"]["n"] == 8 and doc["mc"]["n"] == 1
