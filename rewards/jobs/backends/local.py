"""The local backend: a subprocess on this machine, in its own process group, led by ``rewards.jobs.tether``."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from .common import EXIT_FILE, Launch, PollResult, result_from_exit_file, script_body


def _group_runs(pgid: int, script: Path) -> bool:
    """Whether a live process of group ``pgid`` on this machine has ``script`` on its command line (Linux /proc)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True  # no way to tell: trust the recorded pid
    wanted = os.fsencode(str(script))
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            group = int(stat.rsplit(")", 1)[1].split()[2])  # fields after "(comm)": state, ppid, pgrp
            if group == pgid and wanted in (entry / "cmdline").read_bytes().split(b"\0"):
                return True
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile, or not ours to read
    return False


class LocalBackend:
    """A subprocess on this machine (a worker of the ``gpu`` queue, or the CPU), in its own process group,
    led by ``rewards.jobs.tether`` so that the group stops when its watcher dies (a SIGKILLed pool process)."""

    name = "local"
    outlives_watcher = False  # the tether stops the job with its watcher
    _children: dict[int, subprocess.Popen[bytes]] = {}

    def write_script(self, launch: Launch) -> Path:
        launch.work_dir.mkdir(parents=True, exist_ok=True)
        launch.script_path.write_text("#!/usr/bin/env bash\n" + script_body(launch), encoding="utf-8")
        return launch.script_path

    def submit(self, launch: Launch) -> str:
        script = self.write_script(launch)
        (launch.work_dir / EXIT_FILE).unlink(missing_ok=True)  # never read a previous attempt's status
        tether = [sys.executable, "-m", "rewards.jobs.tether", str(os.getpid())]
        process = subprocess.Popen([*tether, "bash", str(script)], cwd=settings.BASE_DIR, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                   env={**os.environ, **launch.secrets} if launch.secrets else None)
        self._children[process.pid] = process
        return str(process.pid)

    def _alive(self, pid: int) -> bool:
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def poll(self, launch: Launch, external_id: str) -> PollResult:
        done = result_from_exit_file(launch.work_dir)
        if done is not None:
            self._children.pop(int(external_id), None)
            return done
        if self._alive(int(external_id)):
            return PollResult("running")
        done = result_from_exit_file(launch.work_dir)  # it may have finished between the two checks
        if done is not None:
            return done
        return PollResult("lost", None, f"process {external_id} exited without writing an exit status")

    def cancel(self, launch: Launch, external_id: str) -> None:
        """SIGTERM to the whole process group (tether, bash and the trainer), SIGKILL if still there after 10 s.

        Only a group running this job's script is signalled: the reaper may run on another machine or container
        (where the pid is someone else's, and the tether has stopped the job by itself), or the pid may be reused.
        """
        pid = int(external_id)
        if not _group_runs(pid, launch.script_path):
            return
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        child = self._children.pop(pid, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        if child is not None:
            child.wait(timeout=10)

