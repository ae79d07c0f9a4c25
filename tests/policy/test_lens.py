import pytest

from kernelkiln.errors import UserError
from kernelkiln.policy.lens import assign_lenses, eligible_lenses, load_lenses

FAMILIES = ("softmax", "reduction", "matmul", "elementwise", "norm", "transpose", "attention", "fused_matmul")


def test_eight_bundled_lenses_load_with_playbooks():
    lenses = load_lenses()
    assert len(lenses) == 8
    assert {lens.name for lens in lenses} == {
        "general",
        "vectorization",
        "tiling",
        "memory_layout",
        "fusion",
        "parallelism",
        "precision",
        "algorithm",
    }
    for lens in lenses:
        lines = [line for line in lens.playbook.splitlines() if line.strip()]
        assert 4 <= len(lines) <= 8, lens.name
        assert lens.title


def test_every_lens_is_eligible_for_some_family_in_the_repo():
    for lens in load_lenses():
        assert any(lens.eligible(family) for family in FAMILIES), lens.name


@pytest.mark.parametrize("family", ["elementwise", "softmax", "reduction", "norm"])
def test_matmul_only_tiling_lens_is_never_given_to_non_matmul_families(family):
    tiling = next(lens for lens in load_lenses() if lens.name == "tiling")
    assert not tiling.eligible(family)
    assert tiling not in eligible_lenses(family)
    assert all(lens.name != "tiling" for lens in assign_lenses(family, len(eligible_lenses(family))))


def test_tiling_lens_is_eligible_for_matmul_and_attention():
    names = {lens.name for lens in eligible_lenses("matmul")}
    assert "tiling" in names and len(names) == 8
    assert "tiling" in {lens.name for lens in eligible_lenses("attention")}


@pytest.mark.parametrize("family", [*FAMILIES, None])
def test_general_lens_comes_first_for_every_family(family):
    assert assign_lenses(family, 1)[0].name == "general"


@pytest.mark.parametrize("family", FAMILIES)
def test_assigned_lenses_are_all_different(family):
    count = len(eligible_lenses(family))
    assigned = assign_lenses(family, count)
    assert len({lens.name for lens in assigned}) == count


def test_more_agents_than_eligible_lenses_is_a_one_line_user_error():
    count = len(eligible_lenses("elementwise"))
    with pytest.raises(UserError) as caught:
        assign_lenses("elementwise", count + 1)
    message = str(caught.value)
    assert "\n" not in message
    assert f"--agents {count}" in message


def test_lenses_prefer_their_knobs():
    lenses = {lens.name: lens for lens in load_lenses()}
    assert lenses["tiling"].prefers("TILE_M") and not lenses["tiling"].prefers("FLAGS")
    assert lenses["vectorization"].prefers("FLAGS")
    assert lenses["parallelism"].prefers("THREADS")
