"""A task as it travels to an evaluation actor: the file's text, not its path.

Its own light module (no torch): unpickling one must not load the guard in a process that
only routes it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelkiln.task import Task


@dataclass(frozen=True)
class TaskShipment:
    """A task as an actor needs it: the file's text under its name, and its size overrides."""

    filename: str
    source: str
    overrides: dict[str, Any]

    @classmethod
    def of(cls, task: Task) -> TaskShipment:
        return cls(filename=task.path.name, source=task.source, overrides=dict(task.overrides))

    @property
    def key(self) -> str:
        text = f"{self.filename}\0{self.source}\0{sorted(self.overrides.items())!r}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def load(self, folder: Path) -> Task:
        """The task, from its text written under ``folder`` (its seeds stay with the driver: the guard needs none)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / self.filename
        path.write_text(self.source, encoding="utf-8")
        from kernelkiln.task import load_task

        return load_task(path, self.overrides, starts=False)
