"""Tiny task files for tests (data, not imported), and a folder of them to use as a suite."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TASKS = Path(__file__).resolve().parent


@contextmanager
def tiny_suite(names: tuple[str, ...] = ("tiny",)) -> Iterator[Path]:
    """A temporary suite folder holding tiny_softmax under each of ``names``, with FLOPs/bytes metadata.

    Each copy names its seed by absolute path; the folder is world-readable because
    sandboxed workers read task files as another user (pytest's tmp_path is private to root).
    """
    from kernelkiln.testing.candidates import CANDIDATES

    text = (TASKS / "tiny_softmax.py").read_text().replace(
        '"start": "../candidates/softmax_knobs.py"',
        f'"start": "{CANDIDATES / "softmax_knobs.py"}", "flops": lambda batch_size, dim, **_: 5.0 * batch_size * dim, '
        '"bytes": lambda batch_size, dim, **_: 8.0 * batch_size * dim')
    suite = Path(tempfile.mkdtemp(prefix="kiln-suite-"))
    try:
        suite.chmod(0o755)
        for name in names:
            (suite / f"{name}.py").write_text(text)
            (suite / f"{name}.py").chmod(0o644)
        yield suite
    finally:
        shutil.rmtree(suite)
