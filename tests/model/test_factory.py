"""``FILE:FUNCTION`` factories: the user's model and inputs, or one line saying what is wrong."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.errors import UserError
from kernelkiln.model.factory import inputs_maker, make_model

MODELS = """
import torch

def linear():
    return torch.nn.Linear(4, 4)

def broken():
    raise ValueError("no weights here\\nsecond line")

def not_a_model():
    return [1, 2]

def one_tensor():
    return torch.zeros(2, 4)

def two_tensors():
    return [torch.zeros(2, 4), torch.ones(2)]

NOT_CALLABLE = 3
"""


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def refusal(call) -> str:
    with pytest.raises(UserError) as refused:
        call()
    message = str(refused.value)
    assert "\n" not in message, message
    return message


def test_a_factory_returns_the_users_module(models):
    model = make_model(f"{models}:linear")
    assert isinstance(model, torch.nn.Linear)


def test_a_neighbouring_module_can_be_imported_by_the_file(tmp_path):
    (tmp_path / "layers.py").write_text("import torch\nWIDTH = 6\n")
    (tmp_path / "net.py").write_text(
        "import torch\nfrom layers import WIDTH\n\ndef build():\n    return torch.nn.Linear(WIDTH, 2)\n"
    )
    assert make_model(f"{tmp_path / 'net.py'}:build").in_features == 6


def test_inputs_are_always_a_tuple_and_drawn_anew_each_call(models):
    (one,) = inputs_maker(f"{models}:one_tensor")()
    assert one.shape == (2, 4)
    assert len(inputs_maker(f"{models}:two_tensors")()) == 2
    draw = inputs_maker(f"{models}:two_tensors")
    assert draw()[0] is not draw()[0]


@pytest.mark.parametrize(
    "spec, words",
    [
        ("{models}", "must be FILE:FUNCTION"),
        ("{models}:", "must be FILE:FUNCTION"),
        ("{models}:not-a-name", "must be FILE:FUNCTION"),
        ("{folder}/missing.py:build", "no file"),
        ("{models}:build", "has no function build"),
        ("{models}:NOT_CALLABLE", "has no function NOT_CALLABLE"),
        ("{models}:broken", "failed: ValueError: no weights here"),
        ("{models}:not_a_model", "returned a list, not a torch.nn.Module"),
    ],
)
def test_a_bad_model_spec_is_one_line(models, spec, words):
    message = refusal(lambda: make_model(spec.format(models=models, folder=models.parent)))
    assert words in message and "MODEL" in message


def test_a_file_that_fails_to_import_is_one_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import no_such_module_anywhere\n")
    message = refusal(lambda: make_model(f"{path}:build"))
    assert f"importing {path} failed: ModuleNotFoundError" in message


def test_a_bad_inputs_spec_names_the_option(models):
    assert "--inputs" in refusal(lambda: inputs_maker(f"{models}:nope"))
    draw = inputs_maker(f"{models}:broken")
    assert "--inputs" in refusal(draw) and "ValueError" in refusal(draw)


def test_a_failure_is_described_by_its_type_and_first_line():
    from kernelkiln.errors import described

    assert described(KeyError("w0")) == "KeyError: 'w0'"
    assert described(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert described(ValueError()) == "ValueError"
