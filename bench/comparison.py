"""How long "Compare PRM and ORM" takes from the click to the figures, on a campaign and pool already loaded.

    # a worker must be running against the same database and broker, e.g.
    .venv/bin/celery -A steplab worker -Q default,gpu -c 2 &
    .venv/bin/python bench/comparison.py --campaign demo              # the default budget, as the demo's admin
    .venv/bin/python bench/comparison.py --campaign demo --max-steps 30 --user researcher

It starts a run through the same service as the dashboard's button, polls it, and prints one line per stage
as the run reaches it (seconds since the click), then the best-of-N table, the PRM's step-level figures
and one JSON line with everything.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")


def main() -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from annotate.models import Campaign
    from rewards.jobs import selectors
    from rewards.jobs.services.comparisons import DEFAULT_MAX_STEPS, start_comparison

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--campaign", required=True)
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS)
    # the comparison's later stages (snapshot, training, scoring) act as the account that started it
    parser.add_argument("--user", default="admin", help="a campaign admin or researcher (default: the demo's admin)")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    campaign = Campaign.objects.get(slug=args.campaign)
    started = time.time()
    user = get_user_model().objects.get(username=args.user)
    run = start_comparison(campaign, max_steps=args.max_steps, user=user)
    seen: dict[str, float] = {}
    while time.time() - started < args.timeout:
        run = selectors.comparison_run(run.pk)
        key = f"{run.status}/{run.stage}"
        if key not in seen:
            seen[key] = round(time.time() - started, 1)
            print(f"{seen[key]:8.1f} s  {run.status:<10} {run.stage}", flush=True)
        if not run.is_active:
            break
        time.sleep(2)
    elapsed = round(time.time() - started, 1)
    jobs = {name: getattr(run, name) for name in ("prm_job", "orm_job", "prm_scoring", "orm_scoring")}
    durations = {name: round(job.duration_s, 1) if job and job.duration_s else None for name, job in jobs.items()}
    result = {"campaign": campaign.slug, "max_steps": args.max_steps, "status": run.status, "error": run.error,
              "seconds": elapsed, "dataset_version": str(run.dataset_version) if run.dataset_version else None,
              "pool": run.pool.name if run.pool else None, "job_seconds": durations}
    if run.evaluation is not None:
        result["best_of_n"] = [{k: row[f"{k}_pct"] if k != "n" else row["n"] for k in ("n", "prm", "orm", "majority",
                                                                                     "pass")}
                               for row in selectors.best_of_n_rows(run.evaluation)]
        result["step_metrics"] = run.evaluation.step_metrics
        for row in result["best_of_n"]:
            print(f"N={row['n']:>3}  PRM {row['prm']}%  ORM {row['orm']}%  majority {row['majority']}%  "
                  f"pass@N {row['pass']}%")
        bench = result["step_metrics"].get("processbench", {})
        print(f"PRM held-out: step AUROC {result['step_metrics'].get('step_auroc')}, first-error acc "
              f"{bench.get('error_acc')}, no-error acc {bench.get('correct_acc')}, F1 {bench.get('f1')}")
    print(f"comparison {run.pk}: {run.status} after {elapsed} s (max_steps {args.max_steps}) {run.error}")
    print(json.dumps(result))
    return 0 if run.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
