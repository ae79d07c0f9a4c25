"""The bundled `kb-cpu` suite: KernelBench-format files in level1/ to level3/, unmodified format, no KILN."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from kernelkiln.task import bundled_suites, load_suite, load_task

SUITE = bundled_suites()["kb-cpu"]
FILES = sorted(p for p in SUITE.path.glob("level[123]/*.py") if not p.name.startswith("_"))  # as laid out


@pytest.fixture(scope="module")
def tasks():
    return {path: load_task(path) for path in FILES}


def _assigned(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        )
        names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def test_the_suite_is_bundled_as_kb_cpu_and_lists_every_file_of_its_level_folders():
    assert load_suite("kb-cpu") == SUITE
    assert SUITE.path == Path(__file__).resolve().parents[2] / "kernelkiln" / "suites" / "kb_cpu"
    assert len(FILES) >= 40
    assert sorted(SUITE.task_paths()) == FILES  # the loader lists level1/, level2/ and level3/


def test_files_are_named_and_shaped_like_kernelbench_with_no_kiln_metadata():
    numbers = []
    for path in FILES:
        match = re.fullmatch(r"(\d+)_\w+\.py", path.name)
        assert match, path.name
        numbers.append(int(match.group(1)))
        source = path.read_text()
        tree = ast.parse(source)
        assert "KILN" not in _assigned(tree), path.name
        assert "manual_seed" not in source, path.name
        top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= top, path.name
    assert len(numbers) == len(set(numbers)), "task numbers must be unique across levels"
    assert len({p.stem for p in FILES}) == len(FILES)


def test_every_task_loads_and_its_reference_runs_at_its_own_sizes_with_finite_outputs(tasks):
    for path, task in tasks.items():
        assert task.op_family is not None, path.name
        assert len(task.workloads) == 1, path.name  # no KILN: the file's own sizes
        workload = task.workloads[0]
        model = task.make_model(workload, seed=0)
        inputs = task.make_inputs(workload, seed=0)
        assert all(x.dtype in (torch.float32, torch.int64) for x in inputs if isinstance(x, torch.Tensor)), path.name
        with torch.no_grad():
            out = model(*inputs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        for o in outs:
            assert isinstance(o, torch.Tensor), path.name
            if o.is_floating_point():
                assert o.dtype == torch.float32, path.name
                assert bool(torch.isfinite(o).all()), path.name


def test_levels_come_from_the_folders_and_span_one_to_three(tasks):
    levels = {path: task.level for path, task in tasks.items()}
    for path, level in levels.items():
        assert path.parent.name == f"level{level}", path
    counts = {n: sum(1 for v in levels.values() if v == n) for n in (1, 2, 3)}
    assert set(levels.values()) == {1, 2, 3}
    assert counts[1] > counts[2] > counts[3] >= 3


def test_the_families_cover_memory_bound_and_compute_bound_ops(tasks):
    families = {task.op_family for task in tasks.values()}
    assert {
        "elementwise",
        "reduction",
        "softmax",
        "norm",
        "pooling",
        "scan",
        "matmul",
        "conv",
        "fused_matmul",
        "attention",
    } <= families
