import pytest
from pydantic import ValidationError

from kernelkiln.memory.config import MemoryConfig
from kernelkiln.store.config import StoreConfig


def test_defaults_are_designs():
    c = MemoryConfig()
    assert (c.graph.w_self, c.graph.w_succ, c.graph.gamma) == (1.0, 0.5, 0.9)
    assert (c.value.eta, c.value.alpha_floor, c.value.turn_budget) == (0.2, 0.05, None)  # a run sets it
    assert (c.retrieval.pool_size, c.retrieval.lam) == (20, 0.5)
    assert (c.rules.min_adoptions, c.rules.min_tasks, c.rules.beta, c.rules.budget_tokens) == (3, 3, 0.1, 10_000)
    assert (c.board.summary_chars, c.board.reflection_chars, c.board.horizon) == (160, 1200, 16)


def test_unknown_fields_are_refused():
    with pytest.raises(ValidationError):
        MemoryConfig(graph={"w_self": 1, "typo": 2})
    with pytest.raises(ValidationError):
        StoreConfig(url=None, timeout=3)


def test_every_field_is_documented():
    def walk(model):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                walk(annotation)

    walk(MemoryConfig)
    walk(StoreConfig)
