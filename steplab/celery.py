"""The Celery app: Redis broker in the real stack, a filesystem broker on the embedded default."""
import logging
import os
import sys
from pathlib import Path
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "steplab.settings")

app = Celery("steplab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
log = logging.getLogger(__name__)

#: The queues served by separate worker processes. A local training or scoring job's task holds its worker slot
#: for the whole run (it watches the subprocess), so training-class work (``gpu``) gets a process of its own and
#: imports, metrics and exports (``default``) never wait behind it. Webhook deliveries (``webhooks``, the default
#: of STEPLAB_WEBHOOK_QUEUE) wait on receivers outside: a process of their own too.
WORKER_QUEUES = ("default", "gpu", "webhooks")


def worker_command(queue: str, *, concurrency: int, node: str, options: tuple[str, ...] = ()) -> list[str]:
    """The command line of one worker process serving ``queue`` (the demo and the test suite start one per
    queue, as docker-compose does)."""
    return [sys.executable, "-m", "celery", "-A", "steplab", "worker", "-Q", queue, "-c", str(concurrency),
            "-n", f"{node}-{queue}@%h", *options]


@app.on_after_configure.connect
def make_filesystem_folders(sender: Celery, source: Any, **kwargs: Any) -> None:
    """The embedded default's filesystem broker and file result store need their folders before the first
    task is sent or consumed (kombu makes only the control folder, the file backend none)."""
    if source.broker_url == "filesystem://":
        options = source.broker_transport_options
        for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
    if str(source.result_backend).startswith("file://"):
        Path(source.result_backend.removeprefix("file://")).mkdir(parents=True, exist_ok=True)


def send_task(task: Any, *, args: list[Any], queue: str | None = None) -> Any:
    """Send a task, or return None when the broker cannot be reached (a Redis outage).

    Work of record lives in the database (an import job, a training job, …) in status "queued"; a caller that
    gets None leaves it so, and a periodic dispatcher sends it once the broker is back. The retry policy is
    short on purpose: a web request must not hang for long on a dead broker. Such tasks are declared with
    ``ignore_result=True``: their state is in the database, and sending them never touches the result store.
    """
    from kombu.exceptions import OperationalError

    try:
        return task.apply_async(args=args, queue=queue, retry=True,
                                retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.5})
    except OperationalError as exc:
        log.warning("broker unreachable, %s(%s) stays queued: %s", task.name, args, exc)
        return None
