"""What a command's TASK|SUITE argument names."""

from __future__ import annotations

import pytest

from kernelkiln.cli.paths import target_paths
from kernelkiln.errors import UserError


def test_suites_joined_by_commas_give_every_task_of_each_in_order():
    paths = target_paths("examples,cpu")
    stems = [p.stem for p in paths]
    assert stems[: len(target_paths("examples"))] == [p.stem for p in target_paths("examples")]
    assert len(paths) == len(target_paths("examples")) + len(target_paths("cpu"))


def test_tasks_are_picked_by_name_across_joined_suites():
    paths = target_paths("examples,kb-cpu", "row_softmax,10_Sigmoid")
    assert [p.stem for p in paths] == ["row_softmax", "10_Sigmoid"]
    assert paths[0].parent.name == "examples" and "kb_cpu" in paths[1].parts


def test_a_name_two_joined_suites_share_is_refused_not_guessed():
    with pytest.raises(UserError, match="'layer_norm' is a task of more than one"):
        target_paths("examples,cpu", "layer_norm")


def test_only_suites_may_be_joined():
    with pytest.raises(UserError, match="only suites may be joined"):
        target_paths("cpu,row_softmax")


def test_one_task_is_its_own_file_and_takes_no_task_list():
    assert target_paths("row_softmax")[0].stem == "row_softmax"
    with pytest.raises(UserError, match="is one task"):
        target_paths("row_softmax", "a")
