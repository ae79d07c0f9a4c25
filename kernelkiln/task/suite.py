"""Suites: folders of task files; the bundled ones ship with the package."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelkiln.errors import UserError

_PACKAGE = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Suite:
    """A named folder of KernelBench-format task files."""

    name: str
    path: Path

    def task_paths(self) -> list[Path]:
        """Task files: ``*.py`` not starting with ``_`` in the folder, then in its level1/, level2/ and
        level3/ subfolders (KernelBench's layout), each sorted by name."""
        paths = []
        for folder in (self.path, *(self.path / f"level{n}" for n in (1, 2, 3))):
            paths += sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
        return paths


def bundled_suites() -> dict[str, Suite]:
    """Suites shipped with kernelkiln, by name."""
    return {
        "examples": Suite("examples", _PACKAGE / "examples"),
        "cpu": Suite("cpu", _PACKAGE / "suites" / "cpu"),
        "kb-cpu": Suite("kb-cpu", _PACKAGE / "suites" / "kb_cpu"),
    }


def load_suite(name_or_path: str | Path) -> Suite:
    """A bundled suite by name, or any folder of task files."""
    suites = bundled_suites()
    if str(name_or_path) in suites:
        return suites[str(name_or_path)]
    path = Path(name_or_path)
    if not path.is_dir():
        raise UserError(f"no such suite: {name_or_path} (bundled: {', '.join(suites)})")
    return Suite(path.name, path.resolve())
