"""Launch backends. Local runs for real here; Slurm runs for real in test_slurm.py (a single-node Slurm),
and here only its sbatch script, option handling and the order of its queue commands are checked through a
recording runner. No Kubernetes API server can run here: its manifest is validated against the Kubernetes
JSON schema (the ``kubernetes-validate`` package ships the schemas of each release, offline) and its kubectl
command lines are recorded (a fake for the cluster only)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest

from rewards.jobs.backends import BackendError, KubernetesBackend, Launch, LocalBackend, SlurmBackend, script_body
from tests.waiting import wait_for


class Recorder:
    """Stands in for sbatch/sacct/squeue/scancel/kubectl: records argv, answers from a script of replies."""

    def __init__(self, replies: dict[str, tuple[int, str, str]]) -> None:
        self.calls: list[list[str]] = []
        self.replies = replies

    def __call__(self, argv, **_secret):  # a launch with secrets adds env or input
        self.calls.append(list(argv))
        code, out, err = self.replies.get(argv[0] + (" " + argv[1] if argv[0] == "kubectl" else ""), (0, "", ""))
        return subprocess.CompletedProcess(argv, code, out, err)


def _launch(tmp_path: Path, gpus: int = 1) -> Launch:
    return Launch(name="steplab-train-7", work_dir=tmp_path / "train-7", gpus=gpus, time_limit_minutes=90,
                  commands=[[sys.executable, "-m", "rewards.training", "train", "--config",
                             str(tmp_path / "job 7.json")]])


def test_script_runs_commands_in_order_and_records_the_exit_status(tmp_path: Path) -> None:
    body = script_body(_launch(tmp_path))
    assert "export HF_HUB_OFFLINE=1" in body and "export PYTHONPATH=" in body
    assert f"'{tmp_path}/job 7.json'" in body  # quoted: a space cannot split the argument
    assert body.index("rm -f") < body.index("rewards.training") < body.index("echo $status")


def test_slurm_sbatch_script_and_options(tmp_path: Path, settings) -> None:
    settings.STEPLAB_SLURM = {"partition": "gpu-h200", "account": "steplab", "cpus_per_task": 16, "qos": "",
                              "gpu_type": "h200", "time_limit": "4:00:00",
                              "sbatch_options": ["--constraint=nvlink", "--container-image=nvcr.io#pytorch"],
                              "setup": "module load cuda/12.4\nsource /opt/steplab/.venv/bin/activate"}
    recorder = Recorder({"sbatch": (0, "4242;cluster\n", "")})
    backend = SlurmBackend(runner=recorder)
    launch = _launch(tmp_path, gpus=2)
    assert backend.submit(launch) == "4242"
    script = launch.script_path.read_text()
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    for expected in ("#SBATCH --job-name=steplab-train-7", f"#SBATCH --output={launch.work_dir}/slurm-%j.out",
                     "#SBATCH --time=4:00:00", "#SBATCH --gres=gpu:h200:2", "#SBATCH --partition=gpu-h200",
                     "#SBATCH --account=steplab", "#SBATCH --cpus-per-task=16", "#SBATCH --constraint=nvlink",
                     "#SBATCH --container-image=nvcr.io#pytorch"):
        assert expected in lines
    assert not any(line.startswith("#SBATCH --qos") for line in lines)  # empty: left to the cluster's default
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < lines.index("set -uo pipefail")
    # The setup lines run inside the logged part, before the commands, and stop them when they fail.
    assert script.index("set -e\n  module load cuda/12.4\nsource /opt/steplab/.venv/bin/activate") \
        < script.index("rewards.training train --config")
    assert recorder.calls == [["sbatch", "--parsable", str(launch.script_path)]]

    settings.STEPLAB_SLURM = {"gpus_per_job": "0", "time_limit": ""}  # a CPU partition; the job's own limit
    SlurmBackend(runner=recorder).submit(launch)
    script = launch.script_path.read_text()
    assert "--gres" not in script and "#SBATCH --time=90" in script and "set -e" not in script


def test_slurm_asks_sacct_then_scontrol_then_the_jobcomp_log(tmp_path: Path, settings) -> None:
    """The order of the sources (the parsing of each runs on real output in test_slurm.py)."""
    settings.STEPLAB_SLURM = {"states_from": "auto", "jobcomp_log": str(tmp_path / "jobcomp.log")}
    SlurmBackend._accounting.clear()
    recorder = Recorder({"sacct": (0, "", ""), "scontrol": (1, "", "slurm_load_jobs error: Invalid job id specified")})
    backend = SlurmBackend(runner=recorder)
    launch = _launch(tmp_path)
    lost = backend.poll(launch, "4242")
    assert lost.state == "lost" and "unknown to sacct, scontrol and the jobcomp log" in lost.reason
    assert [call[0] for call in recorder.calls] == ["sacct", "scontrol"]
    (tmp_path / "jobcomp.log").write_text("JobId=4242 UserId=u(1) JobState=TIMEOUT NodeList=n1 ExitCode=0:15\n")
    timed_out = backend.poll(launch, "4242")
    assert (timed_out.state, timed_out.exit_code) == ("failed", None)
    assert timed_out.reason == "Slurm job 4242 TIMEOUT (exit code 0, signal 15) on node n1 [jobcomp]"
    recorder.replies["scontrol"] = (1, "", "slurm_load_jobs error: Unable to contact slurm controller")
    with pytest.raises(BackendError, match="scontrol show job 4242 failed .*Unable to contact"):
        backend.poll(launch, "4242")  # the watcher retries: an unreachable controller is no verdict


# Real `sacct -X --noheader --parsable2 --format=JobIDRaw,State,ExitCode,Reason,NodeList` output of Slurm 22.05.8
# with slurmdbd on MariaDB 10.11 (Debian 12), for jobs that: succeeded, exited 3, were scancelled while pending,
# had their batch process SIGKILLed, ran past `--time=1`, are held. Captured once by hand: running slurmdbd needs
# a MariaDB, which the test run does not start (test_slurm.py runs the cluster without accounting).
SACCT_OUTPUT = """\
7|COMPLETED|0:0|ReqNodeNotAvail|vm
8|FAILED|3:0|ReqNodeNotAvail|vm
9|CANCELLED by 0|0:0|ReqNodeNotAvail|None assigned
10|FAILED|0:9|ReqNodeNotAvail|vm
11|TIMEOUT|0:0|ReqNodeNotAvail|vm
12|PENDING|0:0|JobHeldUser|None assigned
"""


@pytest.mark.parametrize(("job_id", "state", "exit_code", "reason"), [
    ("7", "succeeded", 0, ""),
    ("8", "failed", None, "Slurm job 8 FAILED (exit code 3) on node vm [sacct]"),
    ("9", "cancelled", None, "Slurm job 9 CANCELLED [sacct]"),
    ("10", "failed", None, "Slurm job 10 FAILED (exit code 0, signal 9) on node vm [sacct]"),
    ("11", "failed", None, "Slurm job 11 TIMEOUT on node vm [sacct]"),
    ("12", "running", None, "Slurm job 12 PENDING (JobHeldUser) [sacct]"),
])
def test_slurm_reads_real_sacct_output(tmp_path: Path, job_id: str, state: str, exit_code: int | None,
                                       reason: str) -> None:
    """No exit_code file in the work folder: the verdict and the reason are the queue's alone."""
    recorder = Recorder({"sacct": (0, SACCT_OUTPUT, "")})
    result = SlurmBackend(runner=recorder, options={"states_from": "sacct"}).poll(_launch(tmp_path), job_id)
    assert (result.state, result.exit_code, result.reason) == (state, exit_code, reason)
    assert recorder.calls == [["sacct", "-j", job_id, "-X", "--noheader", "--parsable2",
                               "--format=JobIDRaw,State,ExitCode,Reason,NodeList"]]


def test_slurm_refusal_names_the_command(tmp_path: Path) -> None:
    backend = SlurmBackend(runner=Recorder({"sbatch": (1, "", "sbatch: error: invalid partition")}))
    with pytest.raises(BackendError,
                       match="sbatch --parsable .* failed \\(exit 1\\): sbatch: error: invalid partition"):
        backend.submit(_launch(tmp_path))


def test_kubernetes_manifest_and_kubectl_command_lines(tmp_path: Path, settings) -> None:
    settings.STEPLAB_KUBERNETES = {"namespace": "ml", "image": "registry.local/steplab:1.2", "volume_claim": "work",
                                   "work_root": str(tmp_path)}
    recorder = Recorder({"kubectl get": (0, json.dumps({"status": {"active": 1}}), "")})
    backend = KubernetesBackend(runner=recorder)
    launch = _launch(tmp_path, gpus=1)
    assert backend.submit(launch) == "steplab-train-7"
    manifest = json.loads((launch.work_dir / "job.k8s.json").read_text())
    assert manifest["apiVersion"] == "batch/v1" and manifest["kind"] == "Job"
    assert manifest["metadata"] == {"name": "steplab-train-7", "namespace": "ml",
                                    "labels": {"app.kubernetes.io/part-of": "steplab",
                                               "steplab/job": "steplab-train-7"}}
    spec = manifest["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 90 * 60
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    container = pod["containers"][0]
    assert container["image"] == "registry.local/steplab:1.2"
    assert container["command"] == ["bash", str(launch.script_path)]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container["volumeMounts"] == [{"name": "steplab-work", "mountPath": str(tmp_path)}]
    assert pod["volumes"] == [{"name": "steplab-work", "persistentVolumeClaim": {"claimName": "work"}}]
    assert recorder.calls[0] == ["kubectl", "apply", "-f", str(launch.work_dir / "job.k8s.json")]
    for version in ("1.29.0", kubernetes_validate.latest_version()):  # an older cluster and the newest schema
        kubernetes_validate.validate(manifest, version, strict=True)  # strict: no unknown field either

    assert backend.poll(launch, "steplab-train-7").state == "running"
    assert recorder.calls[1] == ["kubectl", "get", "job", "steplab-train-7", "-n", "ml", "-o", "json"]
    recorder.replies["kubectl get"] = (0, json.dumps({"status": {"failed": 1, "conditions": [
        {"type": "Failed", "reason": "DeadlineExceeded"}]}}), "")
    failed = backend.poll(launch, "steplab-train-7")
    assert failed.state == "failed" and "DeadlineExceeded" in failed.reason
    backend.cancel(launch, "steplab-train-7")
    assert recorder.calls[-1][:4] == ["kubectl", "delete", "job", "steplab-train-7"]


@pytest.mark.parametrize("status", [{"succeeded": 1}, {"failed": 1, "conditions": [{"type": "Failed",
                                                                                 "reason": "BackoffLimitExceeded"}]}])
def test_kubernetes_deletes_a_launchs_secret_once_its_job_has_ended(tmp_path: Path, settings, status) -> None:
    settings.STEPLAB_KUBERNETES = {"namespace": "ml", "work_root": str(tmp_path)}
    recorder = Recorder({"kubectl get": (0, json.dumps({"status": {"active": 1}}), "")})
    backend = KubernetesBackend(runner=recorder)
    base = _launch(tmp_path)
    launch = Launch(name=base.name, work_dir=base.work_dir, commands=base.commands,
                    secrets={"STEPLAB_ENDPOINT_KEY": "sk-test"})
    backend.submit(launch)
    delete_secret = ["kubectl", "delete", "secret", "steplab-train-7-secrets", "-n", "ml", "--ignore-not-found"]
    assert backend.poll(launch, launch.name).state == "running"
    assert delete_secret not in recorder.calls  # the running Job's pod still reads it
    recorder.replies["kubectl get"] = (0, json.dumps({"status": status}), "")
    assert backend.poll(launch, launch.name).state == ("succeeded" if "succeeded" in status else "failed")
    assert recorder.calls[-1] == delete_secret
    # a refused delete is logged, and the Job's end is still reported
    recorder.replies["kubectl delete"] = (1, "", "secrets is forbidden")
    assert backend.poll(launch, launch.name).finished


def test_kubernetes_leaves_no_secret_to_delete_for_a_launch_without_one(tmp_path: Path, settings) -> None:
    settings.STEPLAB_KUBERNETES = {"namespace": "ml", "work_root": str(tmp_path)}
    recorder = Recorder({"kubectl get": (0, json.dumps({"status": {"succeeded": 1}}), "")})
    assert KubernetesBackend(runner=recorder).poll(_launch(tmp_path), "steplab-train-7").state == "succeeded"
    assert [call[:3] for call in recorder.calls] == [["kubectl", "get", "job"]]


def test_kubernetes_schema_check_catches_a_wrong_manifest(tmp_path: Path, settings) -> None:
    """The schema validation above can fail: a misspelt field or a number where Kubernetes wants a string."""
    settings.STEPLAB_KUBERNETES = {"namespace": "ml"}
    manifest = KubernetesBackend(runner=Recorder({})).manifest(_launch(tmp_path))
    version = kubernetes_validate.latest_version()
    manifest["spec"]["template"]["spec"]["containers"][0]["workdir"] = "/srv"
    with pytest.raises(kubernetes_validate.ValidationError, match="'workdir' was unexpected"):
        kubernetes_validate.validate(manifest, version, strict=True)
    del manifest["spec"]["template"]["spec"]["containers"][0]["workdir"]
    manifest["spec"]["backoffLimit"] = "0"
    with pytest.raises(kubernetes_validate.ValidationError, match="is not of type 'integer'"):
        kubernetes_validate.validate(manifest, version, strict=True)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_local_backend_runs_for_real_and_keeps_stderr(tmp_path: Path) -> None:
    backend = LocalBackend()
    launch = Launch(name="t", work_dir=tmp_path / "w", commands=[
        [sys.executable, "-c", "print('first')"],
        [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"],
        [sys.executable, "-c", "print('never')"]])
    pid = backend.submit(launch)
    result = wait_for(lambda: (polled := backend.poll(launch, pid)).state != "running" and polled, timeout=30,
                      every=0.1, what="the local job to end")
    assert (result.state, result.exit_code) == ("failed", 3)
    assert (launch.work_dir / "stdout.log").read_text() == "first\n"
    assert (launch.work_dir / "stderr.log").read_text() == "boom\n"


def test_local_cancel_stops_its_own_group_and_never_a_stranger_with_the_recorded_pid(tmp_path: Path) -> None:
    """A reaper elsewhere (another container, a reused pid) must not signal whatever now has the job's pid."""
    backend = LocalBackend()
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        launch = Launch(name="t", work_dir=tmp_path / "w", commands=[
            [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]])
        backend.write_script(launch)
        backend.cancel(launch, str(stranger.pid))  # as if the job's recorded pid now belonged to it
        own = backend.submit(launch)
        wait_for(lambda: "started" in _read(launch.work_dir / "stdout.log"), timeout=30, every=0.05,
                 what="the job's command to start")
        backend.cancel(launch, own)
        assert backend.poll(launch, own).state != "running"
        # What proves the stranger was never signalled: cancel signals synchronously (killpg) before it returns,
        # and the job's own group, signalled later by the same call, is already gone; a signal sent to the
        # stranger by the first cancel would have ended it by now.
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
