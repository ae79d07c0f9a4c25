"""Which parts of the filesystem a confined process may see: everything else is refused.

Read (and execute): the operating system's own directories, the Python installation with
its site-packages and kernelkiln, and what the caller names (the task file). Write: the
process's own workspace. Hidden outright: the home directories of the user and of root,
and the shared temporary directories, which become the workspace.
"""

from __future__ import annotations

import glob
import os
import pwd
import sys
from pathlib import Path

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys")
TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
_GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*", "/dev/kfd")


def python_installation() -> list[str]:
    """The interpreter, its standard library, site-packages and kernelkiln itself."""
    import kernelkiln

    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        str(Path(kernelkiln.__file__).resolve().parent),
    }
    paths.update(p for p in sys.path if p)
    return sorted(p for p in paths if os.path.exists(p))


def homes() -> list[str]:
    """Home directories to hide: the user's ($HOME and its passwd entry's) and root's."""
    found = {os.environ.get("HOME", ""), "/root", "/home"}
    try:
        found.add(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass
    return sorted(os.path.realpath(h) for h in found if h and os.path.isdir(h) and os.path.realpath(h) != "/")


def devices(gpu: bool) -> list[str]:
    """Character devices the process may open for reading and writing."""
    found = list(_DEVICES)
    if gpu:
        for pattern in _GPU_DEVICES:
            found.extend(glob.glob(pattern))
    return [d for d in found if os.path.exists(d)]


def readable(extra: list[str]) -> list[str]:
    """Everything a worker may read: the system, the Python installation, and ``extra``."""
    return sorted({*SYSTEM, *python_installation(), *extra})
