"""The tuner with what memory lends (exact reuse, transfer, traps), the set-aside rule, and best-of-N."""

from __future__ import annotations

import itertools
import statistics

import pytest

from kernelkiln.agents.tuner import Tuner
from kernelkiln.memory.prior import Neighbour, Prior, Trial, rank_trials
from kernelkiln.task import knobs as K
from kernelkiln.testing.turns import make_turn

NAMES = ("A", "B", "C", "D")
SPACE = "".join(f"{n} = 0\n" for n in NAMES) + f"KNOBS = { {n: list(range(6)) for n in NAMES}!r}\n"


def quadratic(centre: dict[str, int], scale: float = 1.0):
    """Fastest at ``centre``, slower the farther a setting is from it (every value of every knob matters)."""
    return lambda s: scale / (1.0 + 0.05 * sum((s[n] - centre[n]) ** 2 for n in NAMES))


def observed(
    tuner: Tuner,
    settings: K.Settings,
    verdict: str,
    speedup: float | None,
    vs_incumbent: float | None = 1.0,
    move: str = "sampled",
):
    from kernelkiln.store.records import Attempt

    tuner.observe(
        Attempt(
            task_id="t",
            agent="a0",
            verdict=verdict,
            speedup=speedup,
            case={"knobs": settings, "speedup_vs_incumbent": vs_incumbent, "move": move},
        )
    )


def run(tuner: Tuner, speedup, budget: int, prior: Prior = Prior(), target: float = float("inf")) -> list[K.Settings]:
    """Up to ``budget`` proposals, each observed (KEEP when it beats the best so far, else REVERT)."""
    turn, best, made = make_turn(code=SPACE, prior=prior), 0.0, []
    for i in range(budget):
        proposal = tuner.propose(turn)
        if proposal is None:
            break
        knobs = proposal.case.knobs
        made.append(knobs)
        value = speedup(knobs)
        verdict = "KEEP" if value > best else "REVERT"
        observed(tuner, knobs, verdict, value, None if i == 0 else value / max(best, 1e-9), proposal.case.move)
        best = max(best, value)
        if best >= target:
            break
    return made


# -- the set-aside rule ----------------------------------------------------------------------


@pytest.mark.parametrize("search", ["tpe", "enumerate"])
def test_a_value_that_lost_three_times_below_the_median_is_not_proposed_while_untried_settings_remain(search):
    tuner = Tuner("a0", search=search)
    observed(tuner, {"A": 0, "B": 0, "C": 0, "D": 0}, "KEEP", 1.0, None)  # the seed: no contest
    for b in (1, 2, 3):
        observed(tuner, {"A": 5, "B": b, "C": 0, "D": 0}, "REVERT", 0.1)
    for b in (1, 2, 3):
        observed(tuner, {"A": 1, "B": b, "C": 1, "D": 1}, "REVERT", 0.9)
    assert ("A", K.key({"v": 5})) in tuner.set_aside(Prior())
    made = run(tuner, lambda s: 0.5, 60)
    assert all(s["A"] != 5 for s in made)


def test_a_value_paired_once_with_a_figure_above_the_median_is_kept():
    tuner = Tuner("a0")
    observed(tuner, {"A": 0, "B": 0, "C": 0, "D": 0}, "KEEP", 1.0, None)
    observed(tuner, {"A": 5, "B": 1, "C": 0, "D": 0}, "REVERT", 0.95)  # lost to the incumbent, not to the field
    for b in (2, 3):
        observed(tuner, {"A": 5, "B": b, "C": 0, "D": 0}, "REVERT", 0.1)
    observed(tuner, {"A": 2, "B": 2, "C": 2, "D": 2}, "REVERT", 0.2)
    assert ("A", K.key({"v": 5})) not in tuner.set_aside(Prior())


def test_a_value_that_always_trails_its_rivals_is_set_aside_even_where_most_of_the_search_loses():
    # make demo's case: most settings run at 0.12x, one flags value at 0.26x every time (above the median of
    # everything), while its rival value reaches 0.5-1.1x: 0.26x is a loser, however low the field's median.
    tuner = Tuner("a0")
    observed(tuner, {"A": 0, "B": 0, "C": 0, "D": 0}, "KEEP", 0.12, None)
    for b in (1, 2, 3):
        observed(tuner, {"A": 5, "B": b, "C": 0, "D": 0}, "REVERT", 0.26)
    for b in (1, 2, 3, 4, 5, 6):
        observed(tuner, {"A": 0, "B": b, "C": 1, "D": b % 3}, "REVERT", 0.12)
    observed(tuner, {"A": 1, "B": 1, "C": 2, "D": 1}, "KEEP", 1.1)
    observed(tuner, {"A": 1, "B": 2, "C": 2, "D": 1}, "REVERT", 0.5)
    observed(tuner, {"A": 1, "B": 3, "C": 2, "D": 2}, "REVERT", 0.6)
    assert ("A", K.key({"v": 5})) in tuner.set_aside(Prior())


def test_the_seeds_uncontested_keep_is_no_win_for_its_values():
    tuner = Tuner("a0")
    observed(tuner, {"A": 0, "B": 0, "C": 0, "D": 0}, "KEEP", 0.1, None)  # first correct: KEEP by default
    for b in (1, 2, 3):
        observed(tuner, {"A": 0, "B": b, "C": 1, "D": 1}, "REVERT", 0.05)
    for b in (1, 2, 3):
        observed(tuner, {"A": 1, "B": b, "C": 2, "D": 2}, "KEEP", 1.0)
    assert ("A", K.key({"v": 0})) in tuner.set_aside(Prior())


def test_values_set_aside_are_proposed_once_every_other_setting_was_tried():
    small = "A = 0\nB = 0\nKNOBS = {'A': [0, 1], 'B': [0, 1, 2]}\n"
    tuner = Tuner("a0")
    turn = make_turn(code=small, prior=Prior(traps=frozenset({("A", K.key({"v": 1}))})))
    seen = []
    while (proposal := tuner.propose(turn)) is not None:
        seen.append(proposal.case.knobs)
        observed(tuner, proposal.case.knobs, "ACCEPT", 1.0)
    assert len(seen) == 6
    assert [s["A"] for s in seen] == [0, 0, 0, 1, 1, 1]
    assert {p for p in (K.key(s) for s in seen)} == {K.key({"A": a, "B": b}) for a in (0, 1) for b in (0, 1, 2)}


# -- what memory lends -----------------------------------------------------------------------


def test_an_exact_match_s_best_is_the_first_candidate_and_its_known_settings_are_never_proposed():
    known = [{"A": a, "B": 0, "C": 0, "D": 0} for a in range(6)]
    prior = Prior(
        reuse={"A": 3, "B": 0, "C": 0, "D": 0},
        reused_from="t",
        known=tuple(Trial(s, i / 5, 1.0 + i) for i, s in enumerate(known)),
    )
    made = run(Tuner("a0"), lambda s: 1.0, 25, prior)
    assert made[0] == {"A": 3, "B": 0, "C": 0, "D": 0}
    assert not [s for s in made[1:] if s in known]


def test_an_exact_match_that_tried_the_whole_space_costs_one_evaluation():
    small = "A = 0\nKNOBS = {'A': [0, 1, 2]}\n"
    prior = Prior(reuse={"A": 2}, reused_from="t", known=tuple(Trial({"A": a}, a / 2, 1.0) for a in range(3)))
    tuner = Tuner("a0")
    turn = make_turn(code=small, prior=prior)
    first = tuner.propose(turn)
    assert (first.case.move, first.case.knobs) == ("reuse", {"A": 2})
    observed(tuner, first.case.knobs, "KEEP", 1.0, None)
    assert tuner.propose(turn) is None


def test_neighbours_best_settings_come_first_nearest_first_and_fit_the_knobs_they_share():
    near = Neighbour("n1", 0.2, {"A": 2, "B": 9, "E": 1}, 1.5, ())  # B=9 is no option here
    far = Neighbour("n2", 0.9, {"A": 4}, 2.0, ())
    made = run(Tuner("a0"), lambda s: 1.0, 3, Prior(neighbours=(near, far)))
    assert made == [
        {"A": 2, "B": 0, "C": 0, "D": 0},
        {"A": 4, "B": 0, "C": 0, "D": 0},
        {"A": 0, "B": 0, "C": 0, "D": 0},
    ]


def test_a_trap_is_not_proposed_from_the_first_evaluation_on_even_when_a_neighbour_s_best_holds_it():
    trap = ("C", K.key({"v": 5}))
    near = Neighbour("n1", 0.2, {"C": 5}, 1.5, ())
    made = run(Tuner("a0"), lambda s: 0.5, 40, Prior(neighbours=(near,), traps=frozenset({trap})))
    assert made[0] == {"A": 0, "B": 0, "C": 0, "D": 0}  # the seed: the neighbour's best holds the trap
    assert all(s["C"] != 5 for s in made)


def test_the_random_search_ignores_memory_and_proposes_the_seed_then_untried_settings():
    prior = Prior(
        reuse={"A": 3, "B": 0, "C": 0, "D": 0}, reused_from="t", neighbours=(Neighbour("n1", 0.2, {"A": 2}, 1.5, ()),)
    )
    made = run(Tuner("a0", search="random"), lambda s: 1.0, 12, prior)
    assert made[0] == {"A": 0, "B": 0, "C": 0, "D": 0}
    assert len({K.key(s) for s in made}) == 12


@pytest.mark.slow
def test_a_siblings_trials_warm_start_tpe_to_reach_95_percent_of_the_best_in_fewer_evaluations():
    budget = 40

    def evaluations(lend: bool) -> float:
        counts = []
        for i, centre in enumerate(itertools.islice(itertools.product(range(1, 5), repeat=4), 0, 256, 32)):
            here = dict(zip(NAMES, centre, strict=True))
            sibling = quadratic({**here, "D": here["D"] + 1}, scale=3.0)  # its best one step off, 3x the scale
            trajectory = run(Tuner("sibling", rng_seed=100 + i), sibling, 30)  # what its own search measured
            trials = tuple(rank_trials([(s, sibling(s)) for s in trajectory]))
            prior = Prior(neighbours=(Neighbour("sib", 0.3, None, None, trials),)) if lend else Prior()
            speedup = quadratic(here)
            for seed in range(2):
                made = run(Tuner("a0", rng_seed=seed), speedup, budget, prior, target=0.95 * speedup(here))
                counts.append(len(made) if speedup(made[-1]) >= 0.95 * speedup(here) else budget + 1)
        return statistics.fmean(counts)

    # here 13.4 vs 23.7 evaluations (a sibling whose best is 2 steps off in two knobs gave no gain: 20 vs 19)
    assert evaluations(lend=True) < 0.8 * evaluations(lend=False)


def test_a_lesson_whose_settings_a_transfer_move_proposes_is_recorded_as_adopted():
    from kernelkiln.testing.turns import retrieved

    lesson = retrieved(
        "e-best", "A=2", conditions=[K.condition(n, v) for n, v in {"A": 2, "B": 0, "C": 0, "D": 0}.items()]
    )
    other = retrieved("e-other", "C=5", conditions=[K.condition("C", 5)])
    near = Neighbour("n1", 0.2, {"A": 2}, 1.5, ())
    turn = make_turn(code=SPACE, prior=Prior(neighbours=(near,)), experiences=(lesson, other))
    proposal = Tuner("a0").propose(turn)
    assert proposal.case.move == "transfer"
    assert {c.experience_id: c.adopted for c in proposal.choices} == {"e-best": True, "e-other": False}


def test_memory_s_starting_points_are_proposed_once_before_the_agents_own_moves():
    near = Neighbour("n1", 0.2, {"A": 2, "E": 1}, 1.5, ())  # E: a knob this task lacks, so the fit is partial
    tuner = Tuner("a0")
    turn = make_turn(code=SPACE, prior=Prior(neighbours=(near,)))
    moves = []
    for i in range(6):
        proposal = tuner.propose(turn)
        moves.append(proposal.case.move)
        observed(tuner, proposal.case.knobs, "KEEP", 1.0 + i, None if i == 0 else 1.1, proposal.case.move)
        turn = make_turn(code=proposal.code, prior=Prior(neighbours=(near,)))  # the agent follows each KEEP
    # The neighbour's best on this branch would be a new setting each time the branch moves: it is not proposed again.
    assert moves[0] == "transfer" and "transfer" not in moves[1:]


def test_the_seed_is_evaluated_right_after_memory_s_starting_point_even_once_a_keep_moved_the_branch_on():
    near = Neighbour("n1", 0.2, {"A": 2, "B": 3}, 1.5, ())
    tuner = Tuner("a0")
    first = tuner.propose(make_turn(code=SPACE, origin=SPACE, prior=Prior(neighbours=(near,))))
    assert first.case.move == "transfer"
    observed(tuner, first.case.knobs, "KEEP", 0.8, None, "transfer")  # the branch is now the neighbour's best
    second = tuner.propose(make_turn(code=first.code, origin=SPACE, prior=Prior(neighbours=(near,))))
    assert second.case.move == "seed" and second.case.knobs == {"A": 0, "B": 0, "C": 0, "D": 0}
    assert second.code == SPACE, "the seed's own code, not an edit of the branch"


# -- a pool that judges only some settings (a replay of a sampled space) ------------------------------------


@pytest.mark.parametrize("search", ["tpe", "enumerate", "random"])
def test_where_the_pool_judges_a_sample_only_every_proposal_is_in_it_and_the_search_ends_with_it(search):
    import random

    every = [dict(zip(NAMES, values, strict=True)) for values in itertools.product(range(6), repeat=4)]
    sample = [{n: 0 for n in NAMES}, *random.Random(1).sample(every[1:], 11)]
    judgeable = frozenset(K.key(s) for s in sample)
    neighbour = Neighbour("other", 0.5, {n: 5 for n in NAMES}, 2.0, ())  # its best was not measured here
    prior = Prior(neighbours=(neighbour,)) if search != "random" else Prior()
    tuner, made = Tuner("a0", search=search), []
    turn = make_turn(code=SPACE, prior=prior, judgeable=judgeable)
    while (proposal := tuner.propose(turn)) is not None:
        made.append(K.key(proposal.case.knobs))
        observed(tuner, proposal.case.knobs, "REVERT", 0.5 + 0.01 * len(made), None if not made else 0.9)
        assert len(made) <= len(sample)
    assert sorted(made) == sorted(judgeable)


def test_seed_first_evaluates_the_seed_before_the_neighbours_bests_then_takes_them():
    neighbours = tuple(Neighbour(f"n{i}", 0.5, {n: i for n in NAMES}, 2.0, ()) for i in (3, 4))
    moves = {}
    for start_first in (False, True):
        tuner = Tuner("a0")
        made = run(tuner, lambda s: 0.5, 3, Prior(neighbours=neighbours, start_first=start_first))
        moves[start_first] = [K.key(s) for s in made]
    seed, n3, n4 = (K.key({n: i for n in NAMES}) for i in (0, 3, 4))
    assert moves[False] == [n3, n4, seed]
    assert moves[True] == [seed, n3, n4]


def test_random_search_over_a_sampled_space_draws_each_measured_setting_first_equally_often():
    # Projecting uniform draws of the whole space onto the sample favoured (5, 5, 5, 5), alone in its corner:
    # 129 first draws of 300 against 82 and 89 for the two settings that share most of their values.
    import collections

    seed = {n: 0 for n in NAMES}
    sample = [seed, {n: 1 for n in NAMES}, {"A": 1, "B": 1, "C": 1, "D": 2}, {n: 5 for n in NAMES}]
    judgeable = frozenset(K.key(s) for s in sample)
    firsts: collections.Counter[str] = collections.Counter()
    for agent in range(300):
        tuner = Tuner(f"a{agent}", search="random")
        turn = make_turn(code=SPACE, prior=Prior(), judgeable=judgeable)
        observed(tuner, tuner.propose(turn).case.knobs, "KEEP", 1.0, None)
        firsts[K.key(tuner.propose(turn).case.knobs)] += 1
    assert len(firsts) == 3 and all(80 <= n <= 120 for n in firsts.values()), firsts


def test_in_a_sampled_space_tpe_suggestions_are_judged_as_the_measured_settings_they_become():
    # A suggestion whose nearest measured setting was tried (or holds a value set aside) is told and TPE asked
    # again; it used to hand the turn to a random draw (26 of these 380 proposals).
    import random

    every = [dict(zip(NAMES, values, strict=True)) for values in itertools.product(range(6), repeat=4)]
    speed = quadratic({"A": 4, "B": 1, "C": 5, "D": 2})
    moves = []
    for rep in range(20):
        sample = [{n: 0 for n in NAMES}, *random.Random(rep).sample(every[1:], 39)]
        turn = make_turn(code=SPACE, prior=Prior(), judgeable=frozenset(K.key(s) for s in sample))
        tuner, incumbent = Tuner(f"a{rep}"), None
        for _ in range(19):
            proposal = tuner.propose(turn)
            figure = speed(proposal.case.knobs)
            won = incumbent is None or figure > incumbent
            observed(
                tuner,
                proposal.case.knobs,
                "KEEP" if won else "REVERT",
                figure,
                None if incumbent is None else figure / incumbent,
            )
            incumbent = figure if won else incumbent
            moves.append(proposal.case.move)
    assert moves.count("sampled") == len(moves) - 20 and "random" not in moves


def test_in_a_sampled_space_a_neighbours_best_is_tried_once_as_its_nearest_measured_setting():
    # Projected onto the nearest *untried* setting, one neighbour's best came back after every evaluation: 16 of
    # a replayed run's 20 evaluations were transfers of three neighbours' bests, most of them 0.3x.
    import random

    every = [dict(zip(NAMES, values, strict=True)) for values in itertools.product(range(6), repeat=4)]
    sample = [{n: 0 for n in NAMES}, *random.Random(2).sample(every[1:], 23)]
    judgeable = frozenset(K.key(s) for s in sample)
    neighbours = tuple(Neighbour(f"n{i}", 0.5, {n: 5 - i for n in NAMES}, 2.0, ()) for i in range(3))
    tuner, moves = Tuner("a0"), []
    turn = make_turn(code=SPACE, prior=Prior(neighbours=neighbours), judgeable=judgeable)
    for i in range(12):
        proposal = tuner.propose(turn)
        moves.append(proposal.case.move)
        verdict, vs = ("KEEP", None) if i == 0 else ("REVERT", 0.9)
        observed(tuner, proposal.case.knobs, verdict, 1.0 - 0.01 * i, vs, proposal.case.move)
    assert 1 <= moves.count("transfer") <= 3, moves
