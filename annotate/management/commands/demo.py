"""``manage.py demo``: migrate, load the demo campaign idempotently, create the demo accounts, serve.

Serving starts Django's server and an embedded Celery worker with beat on the configured broker (on the
embedded default that is kombu's filesystem transport, so no Redis is needed).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from annotate.demo import DEMO_SLUG, MMLU_SLUG, load_demo


class Command(BaseCommand):
    help = ("Load the demo campaigns ('demo': math; 'demo-mmlu': six other domains) and their accounts, then serve "
            "Steplab with an embedded worker.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-serve", action="store_true", help="stop after loading")
        parser.add_argument("--addrport", default=os.environ.get("STEPLAB_DEMO_ADDRPORT", "127.0.0.1:8000"),
                            help="serve on HOST:PORT (or PORT) instead of 127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="serve without the embedded Celery worker")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        report = load_demo(password=os.environ.get("STEPLAB_DEMO_PASSWORD") or None)
        if report.loaded:
            counts = ", ".join(f"{k}={v}" for k, v in report.counts.items())
            self.stdout.write(f"loaded campaign '{DEMO_SLUG}': {counts}")
        else:
            self.stdout.write(f"campaign '{DEMO_SLUG}' already loaded; left unchanged")
        if report.mmlu_counts:
            counts = ", ".join(f"{k}={v}" for k, v in report.mmlu_counts.items())
            self.stdout.write(f"loaded campaign '{MMLU_SLUG}': {counts}")
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
        worker = None
        if not options["no_worker"]:
            worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "steplab", "worker", "-B",
                                       "-Q", "default,gpu", "-c", "1", "-l", "WARNING",
                                       "-s", str(settings.VAR_DIR / "celerybeat-schedule")])
        self.stdout.write(f"serving on http://{options['addrport']}/ (log in at /accounts/login/)")
        try:
            call_command("runserver", options["addrport"], use_reloader=False)
        finally:
            if worker is not None:
                worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=30)
