"""Run a local job's command so that its whole process group stops when the watcher that started it dies.

``LocalBackend`` starts a job in a session of its own, so that a cancel can signal bash and the trainer
together. That also detaches them from the watcher: a SIGKILLed Celery pool process (OOM killer, a killed
container) would leave the trainer running as an orphan — nobody reports on it, the reaper may run on another
machine or container where its pid means nothing, and a retry would start a second trainer writing into the
same work folder. This small leader of the job's group runs the command and, once its parent is no longer
the watcher (or on SIGTERM), sends SIGTERM to the group, then SIGKILL to what is left after a grace period.

Usage: ``python -m rewards.jobs.tether WATCHER_PID COMMAND...`` (standard library only: no Django setup).
"""
from __future__ import annotations

import os
import signal
import sys
import time

CHECK_EVERY_S = 0.5
GRACE_S = 10.0


def stop_group(child: int) -> None:
    """SIGTERM the group (this process keeps SIGTERM blocked), wait for the command, SIGKILL the rest, us too."""
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and os.waitpid(child, os.WNOHANG) == (0, 0):
        time.sleep(0.1)
    os.killpg(0, signal.SIGKILL)


def run(watcher: int, command: list[str]) -> int:
    """The command's exit status, or never returns when the watcher died or SIGTERM came first."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would reap the command for us
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGCHLD})
    # The command gets an empty signal mask and default SIGPIPE/SIGXFSZ (Python ignores them), as from Popen.
    child = os.posix_spawnp(command[0], command, os.environ, setsigmask=(),
                            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    while True:
        received = signal.sigtimedwait({signal.SIGTERM, signal.SIGCHLD}, CHECK_EVERY_S)
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code  # killed by a signal: the shell's 128 + signal number
        if (received is not None and received.si_signo == signal.SIGTERM) or os.getppid() != watcher:
            stop_group(child)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not (argv[0].isascii() and argv[0].isdigit()):
        print("usage: python -m rewards.jobs.tether WATCHER_PID COMMAND...", file=sys.stderr)
        return 2
    return run(int(argv[0]), argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
