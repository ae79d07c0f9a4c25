"""Measured-spaces datasets: appended rows survive a reload, bad files and mixed machines are one-line errors."""

from __future__ import annotations

import pytest

from kernelkiln.errors import UserError
from kernelkiln.evaluation.spaces import Dataset
from kernelkiln.task import knobs as K
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.spaces import MACHINE, made_up
from kernelkiln.testing.turns import tiny_task

SEED = (CANDIDATES / "softmax_knobs.py").read_text()
OWN = K.key(K.settings_of(K.read_knobs(SEED)))
OTHER = K.key({"REPEAT": 1, "FLAGS": ["-O2"]})


def test_a_dataset_reloads_its_machine_spaces_and_measurements_by_task_and_configuration(tmp_path):
    made_up(tmp_path / "d.jsonl", tiny_task(), SEED, {OWN: 1.0, OTHER: 1.5})
    dataset = Dataset(tmp_path / "d.jsonl")
    assert dataset.one_machine() == MACHINE.key and dataset.machines[MACHINE.key] == MACHINE
    space = dataset.spaces(MACHINE.key)["tiny_softmax"]
    assert set(space) == {OWN, OTHER} and [r.round for r in space[OTHER]] == [0, 1]
    assert space[OTHER][0].speedup == pytest.approx(1.5, rel=1e-3) and space[OWN][0].seed
    assert dataset.space_records[(MACHINE.key, "tiny_softmax")].seed == SEED
    assert ("tiny_softmax", OTHER, 1) in dataset.done(MACHINE.key)


def test_a_line_that_is_not_a_dataset_row_is_a_one_line_error_naming_it(tmp_path):
    path = tmp_path / "d.jsonl"
    made_up(path, tiny_task(), SEED, {OWN: 1.0})
    path.write_text(path.read_text() + '{"kind": "measurement", "task": 3}\n')
    with pytest.raises(UserError, match=r"d.jsonl line 5 is not a dataset row") as raised:
        Dataset(path)
    assert "\n" not in str(raised.value)


def test_a_study_refuses_a_dataset_mixing_machines_unless_one_is_named(tmp_path):
    path = tmp_path / "d.jsonl"
    made_up(path, tiny_task(), SEED, {OWN: 1.0})
    other = MACHINE.model_copy(update={"threads": 2})
    lines = [line.replace(MACHINE.key, other.key) for line in path.read_text().splitlines()]
    lines[0] = other.model_dump_json()
    path.write_text(path.read_text() + "\n".join(lines) + "\n")
    dataset = Dataset(path)
    with pytest.raises(UserError, match="mixes 2 machines"):
        dataset.one_machine()
    assert dataset.one_machine(other.key) == other.key
    with pytest.raises(UserError, match="has no measurements of machine nope"):
        dataset.one_machine("nope")


def test_an_empty_dataset_says_how_to_make_one(tmp_path):
    with pytest.raises(UserError, match="kiln measure"):
        Dataset(tmp_path / "none.jsonl").one_machine()
