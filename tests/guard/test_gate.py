"""The gate's static rules: what candidates may and may not write."""

from __future__ import annotations

import pytest

from kernelkiln.guard import gate

OK = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from kernelkiln import native

class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self._cache = None

    def forward(self, x):
        w = self.linear.weight
        return F.relu(x) * math.sqrt(2.0) + w.sum()
'''


def messages(source: str, forbidden=()) -> list[str]:
    return [i.message for i in gate.check(source, forbidden)]


def test_an_ordinary_candidate_passes():
    assert messages(OK, {"softmax"}) == []


@pytest.mark.parametrize("snippet, message", [
    ("import os", "import of 'os'"),
    ("import torch.utils.cpp_extension", "import of 'torch.utils.cpp_extension'"),
    ("from kernelkiln.native import set_builder", "not available to candidates"),
    ("from kernelkiln import native\nnative.set_builder(None)", "not available to candidates"),
    ("from . import x", "import of"),
    ("x = eval('1')", "use of 'eval'"),
    ("x = __builtins__", "access to '__builtins__'"),
    ("import torch\nx = torch._C", "private torch._C"),
    ("import torch\ntorch.load('f')", "torch.load is not allowed"),
    ("import torch\nx = torch.ops.aten.softmax", "torch.ops is not allowed"),
    ("import torch.nn.functional as F\nF.gelu = None", "monkeypatching torch.nn.functional"),
    ("import math\nmath.pi += 1", "monkeypatching math"),
    ("def f():\n    global g", "global statements"),
])
def test_dangerous_constructs_are_refused(snippet, message):
    found = messages(snippet + "\nclass ModelNew:\n    pass\n")
    assert any(message in m for m in found), found


def test_reference_ops_are_refused_in_any_spelling():
    src = "import torch\nfrom torch.nn.functional import softmax\nclass ModelNew:\n    def f(self, x, w):\n{}\n"
    assert "calls the reference op 'softmax'" in messages(src.format("        return torch.softmax(x, 1)"), {"softmax"})[0]
    assert messages(src.format("        return x.softmax(1)"), {"softmax"})
    assert messages(src.format("        return softmax(x, 1)"), {"softmax"})
    assert "@ operator" in messages(src.format("        return x @ w"), {"matmul"})[0]
    assert messages(src.format("        return x @ w"), set()) == []


def test_submodules_named_like_ops_are_not_calls():
    src = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def f(self, x):\n        return self.linear.weight\n"
    assert messages(src, {"linear"}) == []


def test_syntax_errors_and_missing_model_new_are_reported_with_lines():
    [issue] = gate.check("def f(:\n")
    assert issue.message.startswith("syntax error") and issue.line == 1
    assert messages("x = 1\n") == ["defines no top-level class ModelNew"]
