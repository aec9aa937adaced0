"""Schedule shapes, edits (continuity, re-aimed end points) and YAML round trips."""

from __future__ import annotations

import numpy as np
import pytest

from ladder import LadderError, Schedule, SeqPhase
from ladder.config.yamlio import build, to_dict

PEAK, MIN = 1e-3, 0.05


def sched(**kw) -> Schedule:
    args = dict(peak_lr=PEAK, total_steps=1000, warmup_steps=10, decay="linear", min_lr_ratio=MIN)
    args.update(kw)
    return Schedule(**args)


def test_warmup_is_linear_to_the_peak():
    lr = sched().lrs()
    np.testing.assert_allclose(lr[:10], PEAK * np.arange(1, 11) / 10)


def test_the_line_a_person_reads_counts_steps_in_words():
    assert "warmup 10 steps, floor 0.05×peak, 1000 steps" in sched().describe()
    assert "warmup 1 step," in sched(warmup_steps=1).describe()


@pytest.mark.parametrize("decay", ["linear", "cosine", "1-sqrt"])
def test_decays_run_from_peak_to_the_floor_on_the_last_step(decay):
    lr = sched(decay=decay).lrs()
    assert len(lr) == 1000
    assert lr[10] == pytest.approx(PEAK)
    assert lr[-1] == pytest.approx(PEAK * MIN)
    assert np.all(np.diff(lr[10:]) <= 1e-18)


def test_shapes_at_the_midpoint():
    mid = 10 + (999 - 10) / 2
    floor = PEAK * MIN
    assert sched(decay="linear").lr(mid) == pytest.approx(floor + (PEAK - floor) * 0.5)
    assert sched(decay="cosine").lr(mid) == pytest.approx(floor + (PEAK - floor) * 0.5)
    assert sched(decay="1-sqrt").lr(mid) == pytest.approx(floor + (PEAK - floor) * (1 - np.sqrt(0.5)))


def test_wsd_is_stable_then_cools_down():
    s = sched(decay="wsd", cooldown_steps=200, cooldown_shape="1-sqrt")
    lr = s.lrs()
    assert np.all(lr[10:800] == PEAK)
    assert lr[-1] == pytest.approx(PEAK * MIN)
    assert lr[900] < PEAK


def test_constant():
    assert np.all(sched(decay="constant").lrs()[10:] == PEAK)


@pytest.mark.parametrize("decay", ["linear", "cosine", "1-sqrt", "wsd"])
def test_shorten_keeps_the_past_and_re_aims_the_decay(decay):
    base = sched(decay=decay, cooldown_steps=200 if decay == "wsd" else 0)
    short = base.shorten(at_step=500, new_total_steps=800)
    assert short.horizon == 800
    old, new = base.lrs(), short.lrs()
    assert len(new) == 800
    np.testing.assert_array_equal(new[:500], old[:500])
    assert new[500] == pytest.approx(old[500], rel=1e-12)  # continuous at the edit
    assert new[-1] == pytest.approx(PEAK * MIN)  # still ends at the floor on the new last step
    assert np.all(np.diff(new[500:]) <= 1e-18)
    if decay != "wsd":
        assert np.all(new[501:] < old[501:800])  # a shorter horizon decays faster


def test_early_cooldown_branch():
    base = sched(decay="wsd", cooldown_steps=100)
    branch = base.early_cooldown(at_step=400, length=100, shape="linear")
    lr = branch.lrs()
    assert branch.horizon == 500 and len(lr) == 500
    np.testing.assert_array_equal(lr[:400], base.lrs()[:400])
    assert lr[400] == pytest.approx(PEAK)
    assert lr[-1] == pytest.approx(PEAK * MIN)
    np.testing.assert_allclose(np.diff(lr[400:]), -(PEAK - PEAK * MIN) / 99)


def test_two_edits_apply_in_order():
    s = sched().shorten(300, 900).early_cooldown(600, 50)
    lr = s.lrs()
    assert s.horizon == 650 and lr[-1] == pytest.approx(PEAK * MIN)
    np.testing.assert_array_equal(lr[:600], sched().shorten(300, 900).lrs()[:600])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: sched().shorten(5, 900), "after warmup"),
        (lambda: sched().shorten(500, 400), "must be past the step"),
        (lambda: sched().early_cooldown(1200, 10), "before the current horizon"),
        (lambda: sched().shorten(600, 900).shorten(400, 800),
         "shorten edit at step 400 is placed before the earlier shorten edit at step 600; .* at step 600 or later"),
        (lambda: sched(min_lr_ratio=1.5), "min_lr_ratio"),
        (lambda: sched(decay="wsd"), "cooldown_steps"),
        (lambda: sched(warmup_steps=1000), "warmup_steps"),
    ],
)
def test_bad_schedules_are_refused(make, message):
    with pytest.raises(LadderError, match=message):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: sched().shorten(500, 1200),
         r"shorten at step 500: new_total_steps=1200 must not be past the current horizon \(1000 steps\); a shorten "
         r"edit cuts the run: give at most 1000, or plan the longer run with schedule.total_steps"),
        (lambda: sched().shorten(300, 800).shorten(500, 900), r"new_total_steps=900 .* current horizon \(800 steps\)"),
        (lambda: sched().early_cooldown(900, 200),
         r"cooldown at step 900: length=200 ends at step 1100, past the current horizon \(1000 steps\); an early "
         r"cooldown ends sooner: give a length of at most 100 steps"),
        (lambda: sched().shorten(500, 800).early_cooldown(600, 300),  # a planned shorten to 80%, a cooldown to 90%
         r"cooldown at step 600: length=300 ends at step 900, past the current horizon \(800 steps\)"),
    ],
)
def test_an_edit_that_lengthens_the_run_is_refused(make, message):
    with pytest.raises(LadderError, match=message):
        make()


def test_edits_ending_at_the_current_horizon_are_kept():
    assert sched().shorten(500, 1000).horizon == 1000  # a no-op cut
    assert sched().early_cooldown(900, 100).horizon == 1000
    assert sched().shorten(500, 800).early_cooldown(600, 200).horizon == 800
    edits = [{"kind": "shorten", "at_step": 500, "new_total_steps": 800},
             {"kind": "cooldown", "at_step": 600, "length": 250}]  # as a hand-written config gives them
    with pytest.raises(LadderError, match=r"length=250 ends at step 850, past the current horizon \(800 steps\)"):
        build(Schedule, to_dict(sched()) | {"edits": edits})
    assert build(Schedule, to_dict(sched()) | {"edits": edits[:1]}).horizon == 800


def test_sequence_length_phases():
    s = sched(seq_phases=(SeqPhase(0.5, 8192), SeqPhase(0.95, 65536)))
    lens = s.seq_len_at(np.array([0, 499, 500, 949, 950, 999]), 4096)
    assert lens.tolist() == [4096, 4096, 8192, 8192, 65536, 65536]


def test_yaml_round_trip_with_edits_and_phases():
    s = sched(decay="wsd", cooldown_steps=100, seq_phases=(SeqPhase(0.5, 256),)).shorten(400, 800)
    again = build(Schedule, to_dict(s))
    assert again == s
    np.testing.assert_array_equal(again.lrs(), s.lrs())


def test_a_cooldown_length_is_refused_where_the_decay_has_none():
    with pytest.raises(LadderError, match=r"cooldown_steps=100 is read with decay: wsd only \(this schedule's decay is "
                                          r"cosine\); leave it out, or give decay: wsd"):
        sched(decay="cosine", cooldown_steps=100)
    for given in ({}, {"cooldown_steps": 0}):  # left out or 0: the range it must be in, either way
        with pytest.raises(LadderError, match=r"decay: wsd needs cooldown_steps \(the length of its final cooldown, in "
                                              r"steps: more than 0, at most total_steps - warmup_steps = \d+\)"):
            sched(decay="wsd", **given)
    with pytest.raises(LadderError, match=r"cooldown_steps=2000 must be in \(0, total_steps - warmup_steps\]"):
        sched(decay="wsd", cooldown_steps=2000)


def test_a_logged_lr_is_held_to_the_declared_schedule_whichever_update_a_trainer_logs_at_a_step():
    from ladder.config.schedule import as_logged, logged_disagrees

    declared = Schedule(peak_lr=1e-3, total_steps=1000, warmup_steps=50, decay="cosine", min_lr_ratio=0.1)
    steps = np.arange(0, 1000, 10)
    lrs = declared.lrs()
    for logged in (as_logged(lrs, steps), lrs[steps]):  # the update ending at the step, or the next one
        assert logged_disagrees(declared, steps, logged) == ""
    no_warmup = Schedule(peak_lr=1e-3, total_steps=1000, decay="cosine", min_lr_ratio=0.1)
    said = logged_disagrees(no_warmup, steps, as_logged(lrs, steps))  # warmup_steps left out of the declared one
    assert said.startswith("its logged LR departs from its declared schedule: 2e-05 at step 0 against 0.001 (98% of "
                           "the peak 0.001), at 5 of 100 logged values") and "warmup_steps" in said
    tenfold = Schedule(peak_lr=1e-2, total_steps=1000, warmup_steps=50, decay="cosine", min_lr_ratio=0.1)
    assert "at 99 of 100 logged values" in logged_disagrees(tenfold, steps, as_logged(lrs, steps))  # step 0 within 5%
    one_off = as_logged(lrs, steps).copy()
    one_off[50] *= 2  # one value off, the next ones kept: no two in a row
    assert logged_disagrees(declared, steps, one_off) == ""
    assert logged_disagrees(declared, steps, np.full(steps.size, np.nan)) == ""  # nothing logged
