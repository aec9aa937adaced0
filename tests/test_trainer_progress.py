"""The trainer's progress bar shows the run's name as it is (a name is text, not markup)."""

from __future__ import annotations


def test_a_run_name_with_brackets_shows_as_it_is(capsys):
    from trainer_jax.progress import ProgressBar

    bar = ProgressBar("x[/]y run[lr=3e-4]", 10, 0)  # "[/]" as markup would stop the bar with an error
    bar.update(5, 100.0, 2.5)
    bar.close()
    err = capsys.readouterr().err
    assert "x[/]y run[lr=3e-4]" in err and "5/10" in err
