"""The trainer's progress bar: the run's name as it is, and tokens/s as the wall-clock rate."""

from __future__ import annotations


def test_a_run_name_with_brackets_shows_as_it_is(capsys):
    from trainer_jax.progress import ProgressBar

    bar = ProgressBar("x[/]y run[lr=3e-4]", 10, 0, 256)  # "[/]" as markup would stop the bar with an error
    bar.update(5, 2.5)
    bar.close()
    err = capsys.readouterr().err
    assert "x[/]y run[lr=3e-4]" in err and "5/10" in err


def test_tokens_per_second_is_the_wall_clock_rate_evaluations_included(capsys):
    from trainer_jax.progress import ProgressBar

    now = [0.0]
    bar = ProgressBar("run", 100, 0, 256, clock=lambda: now[0])
    bar.update(10, 3.0)
    now[0] = 1.25  # ten more steps in 1.25 s, however fast the steps themselves were
    bar.update(20, 2.5)
    bar.close()
    err = capsys.readouterr().err
    assert "2,048 tok/s" in err and "loss 2.5000" in err
