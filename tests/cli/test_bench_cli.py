"""`kiln bench` as a user runs it."""

from __future__ import annotations

from kernelkiln.testing.cli import kiln


def test_help_names_the_metrics_and_the_repeat_option():
    done = kiln("bench", "--help")
    assert done.returncode == 0
    for word in ("fast_p", "torch.compile", "--repeat", "--no-compile", "kiln machine"):
        assert word in done.stdout


def test_an_unknown_suite_is_one_line_and_exit_2():
    done = kiln("bench", "no_such_suite")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "kiln: error: no such suite: no_such_suite (bundled: examples, cpu, kb-cpu)"
    ]
