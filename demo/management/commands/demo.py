"""``manage.py demo``: migrate, load the demo campaign idempotently, create the demo accounts, serve.

Serving starts Django's server and embedded Celery workers on the configured broker (on the embedded default
that is kombu's filesystem transport, so no Redis is needed): one process per queue, beat in the ``default``
one, so an import never waits behind a training job.
"""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from annotate.models import AutoTrain, Campaign
from annotate.selectors import graded_solutions
from annotate.services.campaigns import update_campaign
from demo.loader import DEMO_SLUG, MMLU_SLUG, load_demo
from steplab.celery import WORKER_QUEUES, worker_command


class Command(BaseCommand):
    help = ("Load the demo campaigns ('demo': math; 'demo-mmlu': six other domains) and their accounts, then serve "
            "Steplab with an embedded worker.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-serve", action="store_true", help="stop after loading")
        parser.add_argument("--addrport", default=os.environ.get("STEPLAB_DEMO_ADDRPORT", "127.0.0.1:8000"),
                            help="serve on HOST:PORT (or PORT) instead of 127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="serve without the embedded Celery workers")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        report = load_demo(password=os.environ.get("STEPLAB_DEMO_PASSWORD") or None)
        campaign = Campaign.objects.get(slug=DEMO_SLUG)
        if report.loaded:
            # the graded_* counts are what the loader graded itself (none: the importer grades every row it
            # stores), so the line says what is stored instead
            counts = ", ".join(f"{k}={v}" for k, v in report.counts.items() if not k.startswith("graded_"))
            self.stdout.write(f"loaded campaign '{DEMO_SLUG}': {counts}")
            # the demo's history is large (a full pass is hours on a CPU): people start training here
            update_campaign(campaign=campaign, auto_train=AutoTrain.OFF)
        else:
            self.stdout.write(f"campaign '{DEMO_SLUG}' already loaded; left unchanged")
        if report.mmlu_counts:
            counts = ", ".join(f"{k}={v}" for k, v in report.mmlu_counts.items())
            self.stdout.write(f"loaded campaign '{MMLU_SLUG}': {counts}")
        graded = graded_solutions(campaign)
        self.stdout.write(f"graded solutions: {graded['correct']} correct, {graded['wrong']} wrong, "
                          f"{graded['ungraded']} without a verdict")
        for username, password in report.passwords.items():
            self.stdout.write(f"account {username} password {password}")
        if not report.passwords:
            self.stdout.write("accounts labeler, admin, researcher exist (passwords unchanged; "
                              "set STEPLAB_DEMO_PASSWORD to reset them)")
        db = settings.DATABASES["default"]
        broker = settings.CELERY_BROKER_URL.split("@")[-1]
        self.stdout.write(f"database: {db['ENGINE'].rsplit('.', 1)[-1]} {db['NAME']}; broker: {broker}")
        if options["no_serve"]:
            return
        workers = [] if options["no_worker"] else [
            subprocess.Popen(worker_command(queue, concurrency=1, node="demo", options=(
                "-l", "WARNING", *(("-B", "-s", str(settings.VAR_DIR / "celerybeat-schedule"))
                                   if queue == "default" else ()))))
            for queue in WORKER_QUEUES]
        self.stdout.write(f"serving on http://{options['addrport']}/ (log in at /accounts/login/)")
        try:
            call_command("runserver", options["addrport"], use_reloader=False)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                worker.wait(timeout=30)
