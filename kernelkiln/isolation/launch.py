"""Run a command under the isolation layers: a small interpreter applies them, then execs it.

The native compiler runs this way (``argv`` builds the command line). Python starts with
``-I -S``, importing nothing but this package, so the layers cost a few milliseconds. The
launcher's first line on stderr is its report (``PREFIX`` + hex of a marshalled dict: marshal
needs no import, where json costs the launcher more than all its layers); when a layer that
``required`` names does not hold, it exits with ``REFUSED`` and says which and why instead
of running the command.
"""

from __future__ import annotations

import marshal
import os
import resource
import sys

from kernelkiln.isolation.layers import (
    Confinement,
    Report,
    apply_filesystem,
    apply_kernel_filters,
    enter_namespaces,
    switch_user,
)
from kernelkiln.isolation.namespaces import CLONE_NEWUSER

PREFIX = "kiln-isolation: "
REFUSED = 125
_LIMITS = {
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "nproc": resource.RLIMIT_NPROC,
    "core": resource.RLIMIT_CORE,
}


def interpreter(module: str, function: str) -> list[str]:
    """A command line that calls ``kernelkiln.isolation.MODULE.FUNCTION()`` in a Python that reads
    no environment and no site-packages (``-I -S``): it starts in milliseconds."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    code = (
        f"import sys; sys.path.insert(0, {root!r}); from kernelkiln.isolation.{module} import {function}; {function}()"
    )
    return [sys.executable, "-I", "-S", "-c", code]


def argv(conf: Confinement, command: list[str], *, limits: dict[str, int], required: list[str]) -> list[str]:
    """The command line that runs ``command`` under ``conf`` with these resource limits."""
    spec = marshal.dumps({"confinement": conf.to_dict(), "limits": dict(limits), "required": list(required)}).hex()
    return [*interpreter("launch", "main"), spec, "--", *command]


def parse(output: str) -> tuple[Report | None, str]:
    """Split the launcher's report off the command's output."""
    first, _, rest = output.partition("\n")
    if not first.startswith(PREFIX):
        return None, output
    data = marshal.loads(bytes.fromhex(first[len(PREFIX) :]))
    return Report(held=data["held"], notes=data["notes"]), rest


def main() -> None:
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))
    command = sys.argv[3:]
    conf = Confinement(**spec["confinement"])
    report = Report()
    flags = enter_namespaces(conf, report, pids=False)
    apply_filesystem(conf, report, flags)
    own_ids = bool(flags & CLONE_NEWUSER) or conf.uid is not None
    for name, value in spec["limits"].items():
        if name != "nproc" or own_ids:  # counted per user: shared with the user's other processes otherwise
            resource.setrlimit(_LIMITS[name], (value, value))
    try:
        switch_user(conf, report)
    except OSError as exc:
        os.write(2, f"isolation refused: cannot switch to uid {conf.uid} ({exc.strerror})\n".encode())
        os._exit(REFUSED)
    apply_kernel_filters(conf, report, user_namespace=bool(flags & CLONE_NEWUSER))
    os.write(2, (PREFIX + marshal.dumps({"held": report.held, "notes": report.notes}).hex() + "\n").encode())
    missing = [layer for layer in spec["required"] if not report.held.get(layer)]
    if missing:
        why = report.notes.get(missing[0], "not applied")
        os.write(2, f"isolation refused: the {missing[0]} layer did not hold ({why})\n".encode())
        os._exit(REFUSED)
    try:
        os.execv(command[0], command)
    except OSError as exc:
        os.write(2, f"cannot run {command[0]}: {exc.strerror}\n".encode())
        os._exit(127)
