"""On-disk cache of built libraries: ``<dir>/<key>.so`` plus a ``<key>.json`` sidecar.

Entries are written by the calling (trusted) user only, files 0644 in a 0755
directory, so a sandboxed candidate can load them but never replace one. Publishing
copies the compiler's output through an ``O_NOFOLLOW`` descriptor into a temp file in
the cache and ``os.replace``s it, so concurrent builders of one key both succeed and
a reader never sees a partial file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from kernelkiln.atomic import write_atomic

from .records import BuildResult, Diagnostic

__all__ = ["CacheError", "lookup", "prepare_cache_dir", "publish"]


class CacheError(OSError):
    """The cache directory is unusable or unsafe."""


def prepare_cache_dir(cache_dir: Path) -> Path:
    """Create ``cache_dir`` (0755) if needed and refuse one others can write to."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    info = os.stat(cache_dir)
    if info.st_uid == os.geteuid():
        if stat.S_IMODE(info.st_mode) != 0o755:
            os.chmod(cache_dir, 0o755)
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(f"cache dir {cache_dir} is writable by other users")
    return cache_dir


def lookup(cache_dir: Path, key: str) -> BuildResult | None:
    """The cached result for ``key``, or None. The ``.so`` is the commit marker."""
    library = Path(cache_dir) / f"{key}.so"
    if not library.is_file():
        return None
    diagnostics: tuple[Diagnostic, ...] = ()
    log = ""
    try:
        meta = json.loads((Path(cache_dir) / f"{key}.json").read_text(encoding="utf-8"))
        diagnostics = tuple(Diagnostic.from_dict(d) for d in meta.get("diagnostics", ()))
        log = str(meta.get("log", ""))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # the sidecar is informational; the library alone is a valid entry
    return BuildResult(ok=True, key=key, path=str(library), diagnostics=diagnostics, cached=True, log=log)


def publish(
    cache_dir: Path, key: str, built: str, *, owner: int | None, diagnostics: tuple[Diagnostic, ...], log: str
) -> str:
    """Copy the library at ``built`` into the cache; return the cached path.

    ``owner`` is the uid that must own ``built`` (the sandboxed compiler's), checked
    on the open descriptor so a symlink, FIFO or hard link planted there is refused.
    """
    cache_dir = Path(cache_dir)
    meta = {"diagnostics": [d.to_dict() for d in diagnostics], "log": log}
    write_atomic(cache_dir / f"{key}.json", json.dumps(meta).encode("utf-8"))
    fd = os.open(built, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise CacheError("compiler output is not a plain file")
        if owner is not None and info.st_uid != owner:
            raise CacheError("compiler output is owned by an unexpected user")
        return str(write_atomic(cache_dir / f"{key}.so", source))
