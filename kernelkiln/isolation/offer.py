"""What this kernel offers: each layer tried once, in a throwaway process, and remembered.

A layer is *offered* when the probe could apply it here. The strict policy requires every
offered layer to hold around every worker and build; a layer not offered is reported with
the reason (no kernel support, a distribution's policy, an unsupported architecture).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile

from kernelkiln.isolation import landlock, namespaces, seccomp
from kernelkiln.isolation.launch import interpreter
from kernelkiln.isolation.layers import LAYERS, Confinement, Report, enter_namespaces


@functools.cache
def offered() -> dict[str, str | None]:
    """Layer -> None when this kernel lets this user apply it, else why not (one line)."""
    with tempfile.TemporaryDirectory(prefix="kiln-probe-") as scratch:
        try:
            done = subprocess.run(
                [*interpreter("offer", "_probe"), scratch],
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin"},
            )
            probed: dict[str, str | None] = json.loads(done.stdout.strip().splitlines()[-1])
            return probed
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            why = "the isolation probe failed to run"
            return {layer: why for layer in LAYERS if layer != "user"}


def _probe() -> None:
    scratch = sys.argv[1]
    conf = Confinement(workspace=scratch, hide=[scratch], notify=True)
    report = Report()
    flags = enter_namespaces(conf, report, pids=True)
    if flags & namespaces.CLONE_NEWNS:
        report.attempt("filesystem", lambda: namespaces.rearrange(scratch, [], [scratch], []))
    if flags & namespaces.CLONE_NEWPID:
        report.attempt("pids", _first_of_own_pids)
    if landlock.unavailable_reason():
        report.skip("landlock", landlock.unavailable_reason() or "")
    else:
        report.attempt("landlock", lambda: landlock.restrict(["/usr"], [scratch]))
    if seccomp.supported():
        report.skip("seccomp", seccomp.supported() or "")
    else:
        report.attempt("seccomp", lambda: seccomp.install(notify=True))
    result = {layer: None if ok else report.notes.get(layer, "did not hold") for layer, ok in report.held.items()}
    print(json.dumps(result), flush=True)
    os._exit(0)


def _first_of_own_pids() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0 if os.getpid() == 1 else 1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(0, "a new PID namespace did not start at pid 1")
