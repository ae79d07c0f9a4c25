"""``FILE:FACTORY``: a function in a Python file, called to make the user's model or its example inputs."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelkiln.errors import UserError, described


def factory(spec: str, what: str) -> Callable[[], Any]:
    """The function ``spec`` names (``models.py:build``); a one-line ``UserError`` when it cannot be had."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise UserError(f"{what} must be FILE:FUNCTION (e.g. models.py:build), not {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise UserError(f"{what}: no file {path}")
    module_name = f"kiln_user_{abs(hash(path.resolve()))}"
    loaded = importlib.util.spec_from_file_location(module_name, path)
    if loaded is None or loaded.loader is None:
        raise UserError(f"{what}: {path} is not a Python file")
    module = importlib.util.module_from_spec(loaded)
    sys.path.insert(0, str(path.resolve().parent))  # the file's own imports of its neighbours
    try:
        sys.modules[module_name] = module
        loaded.loader.exec_module(module)
    except Exception as exc:
        raise UserError(f"{what}: importing {path} failed: {described(exc)}") from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UserError(f"{what}: {path} has no function {name}")
    return fn


def call(fn: Callable[[], Any], what: str) -> Any:
    """``fn()``, its failure one line."""
    try:
        return fn()
    except Exception as exc:
        raise UserError(f"{what} failed: {described(exc)}") from None


def make_model(spec: str) -> Any:
    """The ``nn.Module`` the factory ``spec`` returns."""
    import torch

    model = call(factory(spec, "MODEL"), f"MODEL {spec}")
    if not isinstance(model, torch.nn.Module):
        raise UserError(f"MODEL {spec} returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def inputs_maker(spec: str, sizes: Sequence[str] = ()) -> Callable[..., tuple[Any, ...]]:
    """A function drawing the example inputs (a tuple) with the factory ``spec``, the declared ``sizes`` as keywords."""
    fn = factory(spec, "--inputs")
    try:
        inspect.signature(fn).bind(**dict.fromkeys(sizes, 1))
    except TypeError:
        first = next(iter(sizes))
        raise UserError(
            f"--inputs {spec} does not take {', '.join(sizes)} as keyword arguments (--shapes declares them): "
            f"def {fn.__name__}({first}=128): ..."
        ) from None
    except ValueError:  # no signature to read (a builtin): its calls will say
        pass

    def draw(**given: int) -> tuple[Any, ...]:
        value = call(lambda: fn(**given), f"--inputs {spec}")
        return tuple(value) if isinstance(value, (tuple, list)) else (value,)

    return draw
