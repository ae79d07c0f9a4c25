"""A study on one machine's measured spaces (``kiln ablate --replay``): what its units depend on, which tasks
it can search, and the pool each repeat judges with."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from kernelkiln.bench.space_values import space_value
from kernelkiln.evaluation.replay_pool import ReplayPool
from kernelkiln.evaluation.spaces import Dataset


@dataclass(frozen=True)
class Replay:
    """A study on one machine's measured spaces: every repeat draws its verdicts with its own seed."""

    dataset: Dataset
    machine: str
    _identities: dict[tuple[str, ...], str] = field(default_factory=dict, compare=False, repr=False)

    def identity(self, tasks: list[str]) -> str:
        """What a unit over ``tasks`` (ids) depends on: their rows of this machine (the rest may grow meanwhile)."""
        if tuple(tasks) not in self._identities:
            wanted = set(tasks)
            rows = sorted(
                r.model_dump_json() for r in self.dataset.rows if r.machine == self.machine and r.task in wanted
            )
            self._identities[tuple(tasks)] = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
        return self._identities[tuple(tasks)]

    def measured(self) -> dict[str, str]:
        """The ids of the tasks this machine's rows measured, and the ``task_sha`` they measured."""
        return {r.task: r.task_sha for r in self.dataset.rows if r.machine == self.machine}

    def flat(self, tasks: list[str]) -> list[str]:
        """Of ``tasks`` (ids), those whose measured optimum lies within the noise band of their seed: searching
        them cannot show anything (``space_values.space_value``)."""
        spaces = self.dataset.spaces(self.machine)
        return [t for t in tasks if t in spaces and space_value(t, spaces[t]).flat]

    def pool(self, repeat: int) -> ReplayPool:
        return ReplayPool(self.dataset, self.machine, seed=repeat)
