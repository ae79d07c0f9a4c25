"""Writing a file whole: a reader sees the old content or the new, never a part."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO


def write_atomic(path: Path, content: str | bytes | BinaryIO, mode: int = 0o644) -> Path:
    """Write ``content`` (text, bytes or a binary file to copy) to ``path`` through a temporary file
    in its folder (created if missing) and a rename; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            if isinstance(content, str):
                content = content.encode("utf-8")
            if isinstance(content, bytes):
                out.write(content)
            else:
                shutil.copyfileobj(content, out)
            os.fchmod(out.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
