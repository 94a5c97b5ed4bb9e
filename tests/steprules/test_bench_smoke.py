"""bench/regex_budget.py runs end to end at a tiny size (a 3,000-character step), so it cannot break unnoticed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_regex_budget_bench_runs_and_ends_in_its_json_line() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "regex_budget.py"), "--chars", "3000"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["bench"] == "regex_budget" and figures["step_chars"] == 3000 and figures["victim_chars"] == 32
    assert {"pool_upload_page_s", "pool_upload_api_s", "import_api_s", "import_job_campaign_rule_s",
            "regex_grader_ground_truth_s", "labeling_page_s", "resplit_page_s", "resplit_post_s"} <= figures.keys()
