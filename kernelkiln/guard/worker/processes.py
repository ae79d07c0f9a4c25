"""A sandbox's processes, found and killed from outside: by user id, by parentage and session (Linux /proc)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def pids_of_user(uid: int) -> list[int]:
    """Processes owned by ``uid`` (Linux /proc)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _parents() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every process (Linux /proc)."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"{entry.path}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                found[int(entry.name)] = (int(fields[1]), int(fields[3]))
            except (OSError, IndexError, ValueError):
                continue
    return found


def started_by(pid: int) -> list[int]:
    """Processes ``pid`` started, directly or not, and those still in its session. In a PID
    namespace whose first process is ``pid``, every orphan is re-parented to it, so this
    finds a process that left the session too."""
    table = _parents()
    children: dict[int, list[int]] = {}
    for p, (parent, _) in table.items():
        children.setdefault(parent, []).append(p)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.update(p for p, (_, session) in table.items() if session == pid)
    found.discard(pid)
    return sorted(found)


def kill_user(uid: int) -> None:
    """Kill every process of a sandbox user id, fork bombs included."""
    # kill(-1) as that user signals all of its processes in one kernel pass; new forks cannot slip by.
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["kill", "-KILL", "-1"],
            user=uid,
            group=uid,
            extra_groups=[],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    for _ in range(50):
        pids = pids_of_user(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def tasks_of_user(uid: int) -> int:
    """Processes plus threads of ``uid``: what RLIMIT_NPROC counts."""
    total = 0
    for pid in pids_of_user(uid):
        try:
            total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return total
