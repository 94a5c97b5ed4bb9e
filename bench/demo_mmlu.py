"""How long the MMLU-Pro parts of ``./run demo`` take on the embedded default (SQLite, a fresh var folder):
campaign ``demo-mmlu`` (problems, labeling queue, pool) and the math demo's headroom pool. Target: <= 30 s
together on an idle machine.

    .venv/bin/python bench/demo_mmlu.py

Last line: one JSON object with the figures.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, time
from demo.loader import DEMO_SLUG, import_headroom_pool, load_demo_mmlu
from annotate.models import Campaign
campaign, _ = Campaign.objects.get_or_create(slug=DEMO_SLUG, defaults={"name": "demo"})
started = time.perf_counter()
counts = load_demo_mmlu()
mmlu_s = time.perf_counter() - started
started = time.perf_counter()
headroom = import_headroom_pool(campaign)
headroom_s = time.perf_counter() - started
print(json.dumps({"demo_mmlu_s": round(mmlu_s, 1), "headroom_pool_s": round(headroom_s, 1),
                  "demo_mmlu": counts, "headroom_pool_candidates": headroom}))
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as var:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env["STEPLAB_VAR_DIR"] = var
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        done = subprocess.run([sys.executable, "manage.py", "shell", "-c", SCRIPT], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    total = figures["demo_mmlu_s"] + figures["headroom_pool_s"]
    load = os.getloadavg()[0]
    print(f"demo-mmlu: {figures['demo_mmlu_s']} s ({figures['demo_mmlu']}); headroom pool: "
          f"{figures['headroom_pool_s']} s ({figures['headroom_pool_candidates']} candidates); load {load:.1f}")
    print(json.dumps({**figures, "total_s": round(total, 1), "load_1m": round(load, 1), "target_met": total <= 30}))


if __name__ == "__main__":
    main()
