"""The Kubernetes backend: a ``batch/v1`` Job applied with ``kubectl``, its secrets in a Secret of its own."""
from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings

from .common import (
    EXIT_FILE,
    BackendError,
    CommandLineBackend,
    Launch,
    PollResult,
    Runner,
    default_runner,
    result_from_exit_file,
    script_body,
)

log = logging.getLogger(__name__)


class KubernetesBackend(CommandLineBackend):
    """A ``batch/v1`` Job applied with ``kubectl``, watched with ``kubectl get job -o json``, deleted to cancel.

    A launch's secrets go to a Secret ``<launch>-secrets`` applied before the Job; it is deleted as soon as a poll
    sees the Job ended (succeeded, failed or gone) or on a cancel. Deleting it then, rather than giving it an
    ownerReference to the Job, ends the key's life with the run: an owned Secret would live until the Job itself is
    collected (``ttl_seconds``, a week by default), and the reference needs the Job's uid, which exists only
    after the Job — whose pod already reads the Secret — has been applied.

    Not exercised against a real cluster here: tests check the manifest and the kubectl command lines.
    The work root must be a shared volume (``STEPLAB_KUBERNETES['volume_claim']``) mounted at the same path.
    """

    name = "kubernetes"
    outlives_watcher = True

    def __init__(self, runner: Runner | None = None) -> None:
        self.runner = runner or default_runner
        self.options: dict[str, Any] = settings.STEPLAB_KUBERNETES

    @property
    def namespace(self) -> str:
        return str(self.options.get("namespace", "default"))

    def manifest(self, launch: Launch) -> dict[str, Any]:
        work_root = str(self.options.get("work_root", launch.work_dir.parent))
        resources: dict[str, Any] = {"requests": {"cpu": str(self.options.get("cpu", "4")),
                                                  "memory": str(self.options.get("memory", "32Gi"))}}
        if launch.gpus:
            resources["limits"] = {"nvidia.com/gpu": str(launch.gpus)}
        container = {
            "name": "steplab-job",
            "image": str(self.options.get("image", "steplab:latest")),
            "command": ["bash", str(launch.script_path)],
            "workingDir": str(settings.BASE_DIR),
            "resources": resources,
            "volumeMounts": [{"name": "steplab-work", "mountPath": work_root}],
        }
        if launch.secrets:
            container["envFrom"] = [{"secretRef": {"name": secret_name(launch)}}]
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": launch.name, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/part-of": "steplab", "steplab/job": launch.name}},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": launch.time_limit_minutes * 60,
                "ttlSecondsAfterFinished": int(self.options.get("ttl_seconds", 7 * 24 * 3600)),
                "template": {
                    "metadata": {"labels": {"steplab/job": launch.name}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [container],
                        "volumes": [{"name": "steplab-work", "persistentVolumeClaim": {
                            "claimName": str(self.options.get("volume_claim", "steplab-work"))}}],
                    },
                },
            },
        }

    def submit(self, launch: Launch) -> str:
        launch.work_dir.mkdir(parents=True, exist_ok=True)
        launch.script_path.write_text("#!/usr/bin/env bash\n" + script_body(launch), encoding="utf-8")
        manifest_path = launch.work_dir / "job.k8s.json"
        manifest_path.write_text(json.dumps(self.manifest(launch), indent=2) + "\n", encoding="utf-8")
        (launch.work_dir / EXIT_FILE).unlink(missing_ok=True)
        if launch.secrets:  # on kubectl's stdin, never in a file
            secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "stringData": launch.secrets,
                      "metadata": {"name": secret_name(launch), "namespace": self.namespace,
                                   "labels": {"app.kubernetes.io/part-of": "steplab", "steplab/job": launch.name}}}
            self._run(["kubectl", "apply", "-f", "-"], input=json.dumps(secret))
        self._run(["kubectl", "apply", "-f", str(manifest_path)])
        return launch.name

    def poll(self, launch: Launch, external_id: str) -> PollResult:
        """The Job's state; once it has ended, its Secret is deleted: the key lives no longer than the run."""
        result = self._job_state(launch, external_id)
        if result.finished and launch.secrets:
            try:
                self._delete_secret(launch)
            except BackendError as exc:  # the run's end is known: reporting it does not wait on the clean-up
                log.warning("could not delete the Secret of Kubernetes Job %s: %s", external_id, exc)
        return result

    def _job_state(self, launch: Launch, external_id: str) -> PollResult:
        result = self.runner(["kubectl", "get", "job", external_id, "-n", self.namespace, "-o", "json"])
        if result.returncode != 0:
            return result_from_exit_file(launch.work_dir) or PollResult(
                "lost", None, f"Kubernetes Job {external_id}: {result.stderr.strip()}")
        status = json.loads(result.stdout).get("status", {})
        if status.get("succeeded"):
            done = result_from_exit_file(launch.work_dir)
            return done or PollResult("succeeded", 0)
        if status.get("failed"):
            reasons = [c.get("reason", "") for c in status.get("conditions", []) if c.get("type") == "Failed"]
            done = result_from_exit_file(launch.work_dir)
            return PollResult("failed", done.exit_code if done else None,
                              f"Kubernetes Job failed: {', '.join(r for r in reasons if r) or 'pod failed'}")
        return PollResult("running")

    def _delete_secret(self, launch: Launch) -> None:
        self._run(["kubectl", "delete", "secret", secret_name(launch), "-n", self.namespace, "--ignore-not-found"])

    def cancel(self, launch: Launch, external_id: str) -> None:
        self._run(["kubectl", "delete", "job", external_id, "-n", self.namespace, "--wait=false",
                   "--cascade=foreground"])
        if launch.secrets:
            self._delete_secret(launch)


def secret_name(launch: Launch) -> str:
    """The Kubernetes Secret that holds a launch's secrets."""
    return f"{launch.name}-secrets"

