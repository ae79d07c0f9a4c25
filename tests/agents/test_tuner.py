"""The tuner: knob search of a seed candidate, ordered by memory, the lens and the leaderboard."""

from __future__ import annotations

import ast

from kernelkiln.agents.tuner import Tuner
from kernelkiln.policy.turn import Snapshot, code_hash
from kernelkiln.store.records import Attempt, Experience
from kernelkiln.task import knobs as K
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.turns import lens, make_turn, retrieved

SEED = (CANDIDATES / "softmax_knobs.py").read_text()
SEED_SETTINGS = {"REPEAT": 4, "FLAGS": ["-O2"]}
ALL_SETTINGS = [{"REPEAT": r, "FLAGS": f} for r in (4, 2, 1) for f in (["-O2"], ["-O1"])]


def turn_on_seed(**overrides):
    return make_turn(code=SEED, **overrides)


def attempt_of(proposal, verdict: str = "REVERT", **fields) -> Attempt:
    return Attempt(task_id="tiny_softmax", agent="a0", verdict=verdict, case=proposal.case, code=proposal.code,
                   summary=proposal.summary, **fields)


def tried_seed(tuner: Tuner) -> None:
    tuner.observe(Attempt(task_id="tiny_softmax", verdict="ACCEPT", case={"knobs": dict(SEED_SETTINGS)}))


def run_out(tuner: Tuner, turn) -> list[dict]:
    """Every proposal until the tuner has nothing left, observing each one."""
    seen = []
    for _ in range(50):
        proposal = tuner.propose(turn)
        if proposal is None:
            return seen
        seen.append(proposal.case.knobs)
        tuner.observe(attempt_of(proposal))
    raise AssertionError("the tuner never ran out of settings")


# -- the seed first --------------------------------------------------------------------------
def test_first_proposal_is_the_working_code_itself():
    proposal = Tuner("a0").propose(turn_on_seed())
    assert proposal.code == SEED
    assert proposal.case.move == "seed"
    assert proposal.case.knobs == SEED_SETTINGS
    assert proposal.case.changed == {}
    assert proposal.summary.startswith("seed")
    assert proposal.parent_id is None


def test_proposal_parent_is_the_turn_parent():
    tuner = Tuner("a0")
    tried_seed(tuner)
    assert tuner.propose(turn_on_seed(parent_id="a-parent")).parent_id == "a-parent"


# -- neighbours, lens first ------------------------------------------------------------------
def test_after_the_seed_the_next_proposals_are_single_knob_neighbours_in_declaration_order():
    tuner = Tuner("a0")
    tried_seed(tuner)
    turn = turn_on_seed()  # the general lens prefers no knob
    moves = []
    for _ in range(3):
        proposal = tuner.propose(turn)
        assert proposal.case.move == "neighbour"
        assert len(proposal.case.changed) == 1
        moves.append(proposal.case.changed)
        tuner.observe(attempt_of(proposal))
    assert moves == [{"REPEAT": 2}, {"REPEAT": 1}, {"FLAGS": ["-O1"]}]


def test_a_lens_that_prefers_flags_tries_flags_first():
    precision = lens("precision")
    assert precision.prefers("FLAGS") and not precision.prefers("REPEAT")
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(lens=precision))
    assert proposal.case.move == "neighbour"
    assert proposal.case.changed == {"FLAGS": ["-O1"]}
    assert proposal.case.knobs == {"REPEAT": 4, "FLAGS": ["-O1"]}


def test_the_vectorization_lens_also_tries_flags_first():
    tuner = Tuner("a0")
    tried_seed(tuner)
    assert tuner.propose(turn_on_seed(lens=lens("vectorization"))).case.changed == {"FLAGS": ["-O1"]}


def test_the_proposal_is_a_standalone_file_whose_knobs_read_back_as_its_settings():
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(lens=lens("precision")))
    ast.parse(proposal.code)
    assert "class ModelNew" in proposal.code
    assert K.settings_of(K.read_knobs(proposal.code)) == proposal.case.knobs
    assert [line for line in proposal.code.splitlines() if line not in SEED.splitlines()] == ["FLAGS = ['-O1']"]


# -- experiences ---------------------------------------------------------------------------
def test_a_retrieved_experience_with_knob_settings_is_applied_first_and_recorded_as_adopted():
    lesson = retrieved("e-repeat", "REPEAT=1 is faster", conditions=[K.condition("REPEAT", 1)])
    other = retrieved("e-prose", "vectorize the inner loop", conditions=["inner loop"])
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(experiences=(lesson, other)))
    assert proposal.case.move == "experience"
    assert proposal.case.knobs == {"REPEAT": 1, "FLAGS": ["-O2"]}
    assert [c.experience_id for c in proposal.choices] == ["e-repeat", "e-prose"]
    adopted, unused = proposal.choices
    assert adopted.adopted is True and adopted.why
    assert unused.adopted is False and unused.why == "records no knob settings"


def test_a_resident_rule_is_applied_before_retrieved_experiences_and_recorded_as_adopted():
    lesson = retrieved("e-repeat", "REPEAT=1 is faster", conditions=[K.condition("REPEAT", 1)])
    rule = Experience(id="e-rule", text="FLAGS=-O1", conditions=[K.condition("FLAGS", ["-O1"])], resident=True)
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(experiences=(lesson,), rule_sources=(rule,)))
    assert proposal.case.move == "rule" and proposal.case.changed == {"FLAGS": ["-O1"]}
    assert {(c.experience_id, c.adopted) for c in proposal.choices} == {("e-rule", True), ("e-repeat", False)}
    tuner.observe(attempt_of(proposal))
    follow = tuner.propose(turn_on_seed(experiences=(lesson,), rule_sources=(rule,)))
    assert follow.case.move == "experience"
    assert {(c.experience_id, c.adopted) for c in follow.choices} == {("e-rule", False), ("e-repeat", True)}


def test_a_resident_rule_without_settings_for_this_candidate_is_not_recorded():
    rule = Experience(id="e-rule", text="unroll", conditions=["inner loop"], resident=True)
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(rule_sources=(rule,)))
    assert proposal.case.move == "neighbour" and proposal.choices == ()


def test_an_experience_is_applied_even_before_the_lens_preferred_knobs():
    lesson = retrieved("e-repeat", "REPEAT=1", conditions=[K.condition("REPEAT", 1)])
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(experiences=(lesson,), lens=lens("precision")))
    assert proposal.case.changed == {"REPEAT": 1}


def test_a_lower_ranked_applicable_experience_is_not_adopted_and_says_which_was():
    first = retrieved("e-first", "REPEAT=1", conditions=[K.condition("REPEAT", 1)])
    second = retrieved("e-second", "FLAGS=-O1", conditions=[K.condition("FLAGS", ["-O1"])])
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(experiences=(first, second)))
    assert [(c.experience_id, c.adopted) for c in proposal.choices] == [("e-first", True), ("e-second", False)]
    assert "e-first" in proposal.choices[1].why


def test_an_experience_naming_a_value_outside_the_options_is_not_applied():
    lesson = retrieved("e-bad", "REPEAT=3", conditions=[K.condition("REPEAT", 3)])
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(experiences=(lesson,)))
    assert proposal.case.move == "neighbour"
    assert proposal.case.knobs["REPEAT"] != 3
    (choice,) = proposal.choices
    assert choice.adopted is False and choice.why


def test_an_experience_naming_an_unknown_knob_is_not_applied():
    lesson = retrieved("e-tile", "TILE=64", conditions=[K.condition("REPEAT", 1), K.condition("TILE", 64)])
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(experiences=(lesson,)))
    assert proposal.case.move == "neighbour"
    assert proposal.choices[0].adopted is False


def test_an_experience_whose_settings_were_tried_is_not_adopted_again():
    lesson = retrieved("e-repeat", "REPEAT=1", conditions=[K.condition("REPEAT", 1)])
    tuner = Tuner("a0")
    tried_seed(tuner)
    turn = turn_on_seed(experiences=(lesson,))
    first = tuner.propose(turn)
    tuner.observe(attempt_of(first))
    second = tuner.propose(turn)
    assert second.case.move == "neighbour"
    assert second.choices[0].adopted is False


# -- what was evaluated is skipped ---------------------------------------------------------
def test_settings_whose_code_was_evaluated_by_the_run_are_skipped():
    tuner = Tuner("a0")
    repeat2 = K.apply(SEED, {"REPEAT": 2, "FLAGS": ["-O2"]})  # as any tuner writes it: every knob rewritten
    proposal = tuner.propose(turn_on_seed(evaluated=frozenset({code_hash(SEED), code_hash(repeat2)})))
    assert proposal.case.knobs == {"REPEAT": 1, "FLAGS": ["-O2"]}


def test_the_seed_is_skipped_when_the_run_already_evaluated_it():
    proposal = Tuner("a0").propose(turn_on_seed(evaluated=frozenset({code_hash(SEED)})))
    assert proposal.case.move != "seed"


def test_the_seed_settings_are_not_proposed_again_when_another_agent_evaluated_the_seed():
    tuner = Tuner("a1")  # never observed the seed: another agent of the run evaluated it
    seen = run_out(tuner, turn_on_seed(evaluated=frozenset({code_hash(SEED)})))
    assert K.key(SEED_SETTINGS) not in [K.key(s) for s in seen]


# -- drafting ------------------------------------------------------------------------------
def test_drafting_takes_the_settings_of_another_agent_on_the_leaderboard():
    theirs = K.apply(SEED, {"REPEAT": 1, "FLAGS": ["-O1"]})
    snapshot = Snapshot(agent="a1", lens="precision", attempt_id="a-best", speedup=3.0, summary="best", code=theirs)
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(objective="draft", leaderboard=(snapshot,)))
    assert proposal.case.move == "draft"
    assert proposal.case.knobs == {"REPEAT": 1, "FLAGS": ["-O1"]}
    assert "a1" in proposal.journal


def test_drafting_prefers_the_fastest_snapshot():
    slow = Snapshot("a1", "general", "a-1", 1.5, "", K.apply(SEED, {"REPEAT": 2}))
    fast = Snapshot("a2", "general", "a-2", 2.5, "", K.apply(SEED, {"REPEAT": 1}))
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(objective="draft", leaderboard=(slow, fast)))
    assert proposal.case.knobs["REPEAT"] == 1


def test_drafting_without_a_leaderboard_jumps_to_an_untried_setting():
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(objective="draft"))
    assert proposal.case.move == "draft"
    assert proposal.case.knobs != SEED_SETTINGS


def test_a_leaderboard_snapshot_with_unusable_knobs_is_ignored():
    broken = Snapshot("a1", "general", "a-1", 9.0, "", "REPEAT = 1\nKNOBS = {'REPEAT': []}\n")
    tuner = Tuner("a0")
    tried_seed(tuner)
    proposal = tuner.propose(turn_on_seed(objective="draft", leaderboard=(broken,)))
    assert proposal is not None and "a1" not in proposal.journal


# -- exhaustion and resume -----------------------------------------------------------------
def test_the_tuner_returns_none_once_every_setting_is_tried():
    tuner = Tuner("a0")
    turn = turn_on_seed()
    seen = run_out(tuner, turn)
    assert sorted(map(K.key, seen)) == sorted(map(K.key, ALL_SETTINGS))
    assert tuner.propose(turn) is None


def test_every_proposal_until_exhaustion_is_distinct():
    seen = run_out(Tuner("a0"), turn_on_seed(lens=lens("precision")))
    assert len(seen) == len({K.key(s) for s in seen}) == 6


def test_a_candidate_without_knobs_gets_only_the_seed():
    tuner = Tuner("a0")
    turn = make_turn()
    first = tuner.propose(turn)
    assert first.case.move == "seed" and first.case.knobs == {}
    tuner.observe(attempt_of(first))
    assert tuner.propose(turn) is None


def test_replaying_attempts_through_observe_makes_a_fresh_tuner_skip_them():
    turn = turn_on_seed()
    first = Tuner("a0")
    attempts = []
    for _ in range(3):
        proposal = first.propose(turn)
        attempts.append(attempt_of(proposal))
        first.observe(attempts[-1])
    resumed = Tuner("a0")
    for attempt in attempts:
        resumed.observe(attempt)
    tried = {K.key(a.case.knobs) for a in attempts}
    proposal = resumed.propose(turn)
    assert K.key(proposal.case.knobs) not in tried
    assert K.key(proposal.case.knobs) == K.key(first.propose(turn).case.knobs)


def test_observing_an_attempt_without_knobs_changes_nothing():
    tuner = Tuner("a0")
    tuner.observe(Attempt(task_id="tiny_softmax", verdict="REJECT", case={"move": "llm"}))
    assert tuner.propose(turn_on_seed()).case.move == "seed"
