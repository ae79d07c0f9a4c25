from kernelkiln.context.reask import reask
from kernelkiln.store.records import SUMMARY_CHARS


def test_reask_names_each_problem_and_every_id_still_owed():
    text = reask(["no call of submit_candidate"], ("e-1", "e-2"))
    assert "- no call of submit_candidate\n" in text
    assert "e-1, e-2" in text
    assert f"at most {SUMMARY_CHARS} characters" in text


def test_reask_without_shown_experiences_asks_for_empty_adoptions():
    assert "empty list" in reask(["no code"], ())
