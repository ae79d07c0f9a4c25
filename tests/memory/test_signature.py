"""A task's signature: the exact key decides reuse; family, knobs and sizes place it among its siblings."""

from __future__ import annotations

import math

from kernelkiln.memory.signature import exact_code, signature
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.turns import tiny_task

SEED = (CANDIDATES / "softmax_knobs.py").read_text()


def sign(task, seed=SEED, generated=False, machine="cpu:m:1t", overrides=None):
    task = tiny_task(task) if isinstance(task, str) else task
    return signature(task, task.name, seed, generated=generated, platform="cpu", machine=machine)


def test_the_same_task_seed_and_machine_give_the_same_exact_key():
    assert sign("tiny_softmax").exact == sign("tiny_softmax").exact


def test_another_machine_or_seed_is_another_exact_key():
    base = sign("tiny_softmax")
    assert sign("tiny_softmax", machine="cpu:other:1t").exact != base.exact
    assert sign("tiny_softmax", seed=SEED.replace("REPEAT = 4", "REPEAT = 2")).exact != base.exact


def test_a_hand_written_seed_is_keyed_with_the_reference_and_a_generated_one_by_its_code_alone():
    # The same hand-written seed on two references: two keys; generated code encodes its computation itself.
    assert sign("tiny_softmax").exact != sign("plain_softmax").exact
    assert sign("tiny_softmax", generated=True).exact == sign("plain_softmax", generated=True).exact


def test_the_signature_names_the_family_the_seed_s_knobs_and_the_work_in_log2():
    task = tiny_task("tiny_softmax")
    s = sign(task)
    assert s.family == task.op_family and s.knobs == ["REPEAT", "FLAGS"]
    sizes = [(x.numel(), x.shape[-1]) for w in task.workloads for x in task.make_inputs(w, 0)[:1]]
    assert s.inner == round(sum(math.log2(n) for _, n in sizes) / len(sizes), 3)
    assert s.elements == round(sum(math.log2(n) for n, _ in sizes) / len(sizes), 3)


def test_the_module_docstring_comments_and_layout_do_not_change_the_exact_key():
    # A generated seed's docstring names its task: the same region in two models is the same key.
    first_line = SEED.splitlines()[0]
    renamed = SEED.replace(first_line, '"""Made for region_05_addmm."""').replace("REPEAT = 4", "REPEAT  =  4  # knob")
    assert renamed != SEED
    assert sign("tiny_softmax", seed=renamed).exact == sign("tiny_softmax").exact
    assert sign("tiny_softmax", seed=SEED.replace("REPEAT = 4", "REPEAT = 3")).exact != sign("tiny_softmax").exact


def test_the_exact_code_ignores_the_statistics_of_drawn_values():
    a = "class M:\n    def __init__(self):\n        self.w = torch.randn((8, 8)) * 0.0078125 + 0.0\n"
    b = "class M:\n    def __init__(self):\n        self.w = torch.randn((8, 8)) * 0.00390625 - 0.5\n"
    assert exact_code(a) == exact_code(b)
    masks = (
        "def get_inputs():\n    return [torch.rand((4,)) < 0.25]\n",
        "def get_inputs():\n    return [torch.rand((4,)) < 0.75]\n",
    )
    assert exact_code(masks[0]) == exact_code(masks[1])


def test_the_exact_code_keeps_what_changes_the_computation():
    shape = (
        "def get_inputs():\n    return [torch.randn((8, 8)) * 0.5]\n",
        "def get_inputs():\n    return [torch.randn((8, 16)) * 0.5]\n",
    )
    assert exact_code(shape[0]) != exact_code(shape[1])
    scale = "def f(x):\n    return x * 0.5 + 1.0\n", "def f(x):\n    return x * 0.25 + 1.0\n"
    assert exact_code(scale[0]) != exact_code(scale[1])
    dropout = (
        "class M:\n    def forward(self, x):\n        return x * (torch.rand(x.shape) < 0.5)\n",
        "class M:\n    def forward(self, x):\n        return x * (torch.rand(x.shape) < 0.9)\n",
    )
    assert exact_code(dropout[0]) != exact_code(dropout[1])
