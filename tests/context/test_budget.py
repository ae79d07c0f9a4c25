from kernelkiln.context import ContextBuilder, TokenEstimator, knowledge_budget
from kernelkiln.store.records import Attempt
from kernelkiln.testing.turns import make_turn


def test_knowledge_budget_is_window_minus_system_generation_and_recent():
    assert knowledge_budget(window=128_000, system=3_000, generation=4_000, recent=5_000) == 116_000


def test_knowledge_budget_is_never_negative():
    assert knowledge_budget(window=1_000, system=800, generation=300, recent=100) == 0


def test_builder_budget_subtracts_system_tools_generation_and_verbatim_layers():
    estimator = TokenEstimator()
    history = tuple(Attempt(id=f"a-{i}", task_id="t", verdict="REVERT", speedup=0.9, code="x" * 200) for i in range(4))
    turn = make_turn(history=history, feedback=history[-1], turn=5)
    prompt = ContextBuilder(estimator=estimator).build(turn, window=50_000, generation=2_000, tools_tokens=300)
    system = estimator.estimate(prompt.system) + 300
    verbatim = sum(s.tokens for s in prompt.sections if s.layer in ("hot", "recent"))
    assert prompt.budget == 50_000 - system - 2_000 - verbatim
