"""manage.py evaluate_pool --pool NAME [--campaign SLUG] [--prm-scoring ID] [--orm-scoring ID] [--trials 400] [--seed 0]
[--aggregation product|min]"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...models import ScoringJob
from ...services.evaluation import evaluate_pool
from ...services.pools import pool_named
from ...services.training import JobInputError


class Command(BaseCommand):
    help = "Best-of-N (PRM, ORM, majority, pass@N) on a scored pool; the result shows on the dashboard."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pool", required=True)
        parser.add_argument("--campaign", help="campaign slug (pool names are unique per campaign)")
        parser.add_argument("--prm-scoring", type=int)
        parser.add_argument("--orm-scoring", type=int)
        parser.add_argument("--trials", type=int, default=400)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--aggregation", default="product")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            pool = pool_named(options["pool"], options["campaign"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        jobs: dict[str, ScoringJob | None] = {}
        for key in ("prm_scoring", "orm_scoring"):
            if options[key] is not None:
                jobs[key] = ScoringJob.objects.select_related("reward_model").filter(pk=options[key]).first()
                if jobs[key] is None:
                    raise CommandError(f"--{key.replace('_', '-')}: no scoring job {options[key]}")
        try:
            run = evaluate_pool(pool, trials=options["trials"], seed=options["seed"],
                                aggregation=options["aggregation"], prm_scoring=jobs.get("prm_scoring"),
                                orm_scoring=jobs.get("orm_scoring"))
        except JobInputError as exc:
            raise CommandError(str(exc)) from None
        n = str(run.results["ns"][-1])
        figures = ", ".join(f"{m} {run.results['methods'][m][n]['mean']:.3f}"
                            for m in ("prm", "orm", "majority", "pass") if run.results["methods"].get(m))
        self.stdout.write(f"evaluation {run.pk}: best-of-{n}: {figures}")
