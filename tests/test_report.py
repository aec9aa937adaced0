"""Figures and the HTML report from a store and a prediction: rendered, with what a reader needs."""

from __future__ import annotations

import base64
import dataclasses
import re
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
from typer.testing import CliRunner

from ladder.cli import app
from ladder.errors import LadderError
from tests.synthetic_ladder import micro_plan, write_run

runner = CliRunner()


@pytest.fixture(scope="module")
def predicted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    plan = micro_plan()
    for i, rung in enumerate(plan.rungs):
        write_run(tmp / "runs", rung, noise=0.001, seed=i)
    write_run(tmp / "runs", plan.hero, noise=0.001, seed=9, upto=plan.hero.stop_after_steps // 2, state="running")
    assert runner.invoke(app, ["pull", "local", str(tmp / "runs"), "--store", str(tmp / "store")]).exit_code == 0
    cfg = tmp / "hero.yaml"
    plan.hero.save(cfg)
    res = runner.invoke(app, ["predict", str(cfg), "--store", str(tmp / "store"), "--out", str(tmp / "pred"),
                              "--n-boot", "40"])
    assert res.exit_code == 0, res.output
    return tmp


def test_plot_renders_every_figure(predicted):
    out = predicted / "figs"
    res = runner.invoke(app, ["plot", "--prediction", str(predicted / "pred"), "--store", str(predicted / "store"),
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    for name in ("ladder_fit", "hero_curve", "collapse", "residuals", "diagnostics", "dynamics"):
        img = mpimg.imread(out / f"{name}.png")
        assert img.shape[0] > 300 and img.shape[1] > 600
        assert img[..., :3].std() > 0.05  # something was drawn, not a blank canvas
        assert (out / f"{name}.svg").read_text().lstrip().startswith("<?xml")
    # a rerun of the same figures gives the same bytes (no date, fixed element ids): no spurious diff
    again = predicted / "figs-again"
    assert runner.invoke(app, ["plot", "--prediction", str(predicted / "pred"), "--store", str(predicted / "store"),
                               "--out", str(again)]).exit_code == 0
    for path in sorted(out.glob("*.*")):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name


def test_a_file_of_yours_under_a_figures_name_is_refused_not_drawn_over(predicted, tmp_path):
    args = ["--prediction", str(predicted / "pred"), "--store", str(predicted / "store")]
    assert runner.invoke(app, ["plot", *args, "--out", str(tmp_path / "figs")]).exit_code == 0
    assert runner.invoke(app, ["plot", *args, "--out", str(tmp_path / "figs")]).exit_code == 0  # its own: replaced
    for folder, command in ((tmp_path / "mine", ["plot", *args, "--out", str(tmp_path / "mine")]),
                            (tmp_path / "r_figures", ["report", *args, "--out", str(tmp_path / "r.html")])):
        folder.mkdir()
        (folder / "residuals.svg").write_text("<svg>a figure of mine</svg>")
        (folder / "hero_curve.png").write_bytes(b"")  # empty: nothing to destroy
        res = runner.invoke(app, command)
        assert res.exit_code == 2 and "residuals.svg: not a figure `ladder plot` drew, where this draws one" in \
            " ".join(res.output.split()), res.output
        assert sorted(p.name for p in folder.iterdir()) == ["hero_curve.png", "residuals.svg"]
        assert (folder / "residuals.svg").read_text() == "<svg>a figure of mine</svg>"
    assert not (tmp_path / "r.html").exists()


def test_an_interrupted_plot_leaves_the_figure_folder_as_it_was(predicted, monkeypatch):
    from ladder.data.store import Store
    from ladder.output import plots
    from ladder.output.figures import draw_all
    from ladder.predict.prediction import Prediction

    out = predicted / "figs-interrupted"
    out.mkdir()
    earlier = f"an earlier figure ({plots.FIGURE_TAG})".encode()  # tagged as the figures this draws are
    (out / "residuals.png").write_bytes(earlier)
    save, calls = plots.save, []

    def interrupted(fig, out_dir, name):
        calls.append(name)
        if len(calls) == 3:  # Ctrl-C while the third figure is drawn
            raise KeyboardInterrupt
        return save(fig, out_dir, name)

    monkeypatch.setattr(plots, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        draw_all(Store(predicted / "store"), Prediction.load(predicted / "pred"), out)
    assert len(calls) == 3
    assert sorted(p.name for p in out.iterdir()) == ["residuals.png"]  # nothing new, no staging folder left
    assert (out / "residuals.png").read_bytes() == earlier
    monkeypatch.setattr(plots, "save", save)
    paths = draw_all(Store(predicted / "store"), Prediction.load(predicted / "pred"), out)
    assert {p.parent for p in paths} == {out} and all(p.is_file() for p in paths)
    assert (out / "residuals.png").read_bytes() != earlier
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_report_is_one_self_contained_page(predicted):
    out = predicted / "report.html"
    out.write_text("<html>an earlier report</html>")  # a page of the user's is not replaced
    args = ["report", "--prediction", str(predicted / "pred"), "--store", str(predicted / "store"), "--out", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "exists and is not a page `ladder report` wrote" in res.stderr, res.output
    assert out.read_text() == "<html>an earlier report</html>"
    out.unlink()
    assert runner.invoke(app, args).exit_code == 0
    res = runner.invoke(app, args)  # an earlier report of its own is replaced
    assert res.exit_code == 0, res.output
    assert "(it replaces the page written there before; --out NAME.html keeps both)" in " ".join(res.stdout.split())
    page = out.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 6
    assert all(base64.b64decode(x)[:8] == b"\x89PNG\r\n\x1a\n" for x in images)
    assert 'src="http' not in page and "<link" not in page
    for text in ("Prediction every 5% of the run", "per-fraction law", "Assumptions", "Alert history",
                 "Actual at its latest eval: ", "Training dynamics projected to the hero", 'alt="dynamics"'):
        assert text in page
    fresh = runner.invoke(app, ["report", "--prediction", str(predicted / "pred"), "--store", str(predicted / "store"),
                                "--out", str(predicted / "fresh.html")])
    assert fresh.exit_code == 0 and "Wrote" in fresh.stdout and "replaces" not in fresh.stdout


def test_report_refuses_to_write_over_a_file_it_would_destroy(predicted):
    (predicted / "notes.txt").write_text("kept")
    for target, says in (("pred/prediction.json", "is a file of the prediction in"),
                         ("store/manifest.json", "is a file of the metric store"),
                         ("notes.txt", "exists and is not a .html or .htm file")):
        before = (predicted / target).read_bytes()
        res = runner.invoke(app, ["report", "--prediction", str(predicted / "pred"), "--store",
                                  str(predicted / "store"), "--out", str(predicted / target)])
        assert res.exit_code == 2 and says in res.stderr and target.split("/")[-1] in res.stderr, res.output
        assert (predicted / target).read_bytes() == before


def test_plot_without_a_store_is_a_clear_error(predicted, tmp_path):
    res = runner.invoke(app, ["plot", "--prediction", str(predicted / "pred"), "--store", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no store here" in res.stderr


def test_ladder_figure_counts_compute_as_predict_does(predicted):
    """Every run gives N: the figure's axis is 6·N·D, the per-fraction law's, whether the hero is in the store
    or not yet (fit FLOPs, which count attention, only where the hero's N is not at hand)."""
    from ladder.data.store import Store
    from ladder.output.figures import _axis
    from ladder.predict.dynamics import target_and_rungs
    from ladder.predict.prediction import Prediction

    pred = Prediction.load(predicted / "pred")
    _, target, rungs = target_and_rungs(Store(predicted / "store"), pred, None, "to draw")
    per_token, label, hero = _axis(rungs, target, pred)
    assert "6·N·D" in label
    for _, row in rungs.iterrows():
        assert per_token[str(row["run_id"])] == pytest.approx(6 * row["active_params"], rel=1e-12)
    plan = micro_plan()
    assert hero == pytest.approx(6 * plan.hero.spec.active_params() * plan.hero.tokens, rel=1e-9)
    assert pred.target_params == plan.hero.spec.active_params()
    assert _axis(rungs, target.iloc[0:0], pred)[1:] == (label, hero)  # the hero not pulled yet: the same axis
    older = dataclasses.replace(pred, target_params=None)  # a prediction saved without the hero's N
    per_token, label, hero = _axis(rungs, target.iloc[0:0], older)
    assert "fit compute" in label and hero == pytest.approx(plan.hero.fit_flops, rel=1e-9)
    assert per_token[str(rungs["run_id"].iloc[0])] == pytest.approx(rungs["fit_flops_per_token"].iloc[0], rel=1e-12)


def test_the_report_table_takes_each_rows_nearest_eval_and_refuses_a_file_that_is_not_alerts(tmp_path):
    import numpy as np
    import pandas as pd

    from ladder.output.report import prediction_rows
    from ladder.predict.prediction import Prediction
    from ladder.watch.sinks import read_alerts

    steps = np.arange(100, 10_001, 100)
    med = 3.0 - 1e-4 * steps  # straight between the table's steps: the prediction at any eval is exact
    table = pd.DataFrame({"step": steps, "tokens": steps * 1000, "fraction": steps / 10_000, "compute": steps * 1e9,
                          "median": med, "lo50": med * 0.99, "hi50": med * 1.01, "lo90": med * 0.97,
                          "hi90": med * 1.03, "in_assumptions": True})
    pred = Prediction("hero", "eval/loss", table, planned_steps=10_000)
    evals = np.arange(64, 10_001, 64)  # the run's own eval cadence, never on the table's steps but at the end
    evals[-1] = 10_000
    actual = pd.Series((3.0 - 1e-4 * evals) * 1.01, index=evals)
    rows = prediction_rows(pred, actual)
    assert "–" not in set(rows["actual"]) and len(rows) == 20
    assert set(rows["step"]) <= set(evals.tolist())  # predicted and actual at the same step: the run's eval
    np.testing.assert_allclose(rows["predicted"].astype(float), pred.at(rows["step"])["median"], atol=5e-5)
    np.testing.assert_allclose(rows["actual"].astype(float), actual.loc[rows["step"]], atol=5e-5)
    assert {e for e in rows["error"]} == {"-0.99%"}  # the prediction at each eval's own step, 1% low
    alerts = tmp_path / "alerts.txt"
    alerts.write_text("step,loss\n1,2\n")
    with pytest.raises(Exception, match="not a watcher's alerts file"):
        read_alerts(alerts)


def test_score_warns_when_the_run_is_not_the_one_predicted(predicted):
    import json

    plan = micro_plan()
    args = ["score", "--prediction", str(predicted / "pred"), "--store", str(predicted / "store"), "--format", "json"]
    own = runner.invoke(app, args)
    assert own.exit_code == 0, own.output
    assert json.loads(own.stdout)["warnings"] == []
    rung = plan.rungs[-1]
    other = runner.invoke(app, [*args, "--run", rung.name])
    assert other.exit_code == 0, other.output
    rungs, w = json.loads(other.stdout)["warnings"]
    assert rungs.startswith(f"{rung.name!r} is one of the rungs the prediction was made from, not its target")
    assert f"plans {rung.stop_after_steps:,} steps" in w and f"{plan.hero.stop_after_steps:,}" in w
    table = runner.invoke(app, [*args[:-2], "--run", rung.name])
    assert "warning:" in table.stderr and "is it the run that was predicted?" in table.stderr
    late = runner.invoke(app, [*args, "--run", rung.name, "--from", "0.99"])  # the rung ends before 99% of the hero
    assert late.exit_code == 2 and plan.hero.name not in late.stderr[late.stderr.index("error:"):]
    assert f"{rung.name}: its " in late.stderr and "before --from 0.99; score from an earlier fraction" in late.stderr
    assert late.stderr.index("is one of the rungs") < late.stderr.index("error:")  # why, said before the error
    earlier = re.search(r"\(--from (\d\.\d\d)\)", late.stderr).group(1)
    assert runner.invoke(app, [*args, "--run", rung.name, "--from", earlier]).exit_code == 0  # the advice holds
    odd = runner.invoke(app, [*args[:-2], "--from", "0.155"])  # the share as given: not rounded to 16%
    assert odd.exit_code == 0 and "from 15.5% of the plan" in " ".join(odd.stdout.split()), odd.output


def test_a_run_that_has_not_reached_a_replans_edit_is_scored_as_the_run_predicted(predicted, tmp_path):
    import json

    hero = micro_plan().hero  # its run in the store is at half its plan, its config the plan without the new edit
    at = int(0.6 * hero.schedule.total_steps)
    res = runner.invoke(app, ["replan", str(predicted / "hero.yaml"), "--store", str(predicted / "store"), "--at",
                              str(at), "--cooldown-steps", "20", "--n-boot", "40", "--out", str(tmp_path / "re")])
    assert res.exit_code == 0, res.output
    args = ["--prediction", str(tmp_path / "re"), "--store", str(predicted / "store")]
    scored = runner.invoke(app, ["score", *args, "--format", "json"])
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["warnings"] == []
    report = runner.invoke(app, ["report", *args, "--out", str(tmp_path / "report.html")])
    assert report.exit_code == 0 and "is it the run that was predicted" not in report.output, report.output
    # a replan before the plan's own edit replaces it: the run, short of both, still plans that edit's horizon
    import shutil

    (edit,) = hero.schedule.edits
    shutil.copytree(predicted / "runs", tmp_path / "runs")
    write_run(tmp_path / "runs", hero, noise=0.001, seed=9, upto=edit.at_step - 70, state="running")
    assert runner.invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s2")]).exit_code == 0
    res = runner.invoke(app, ["replan", str(predicted / "hero.yaml"), "--store", str(tmp_path / "s2"), "--at",
                              str(edit.at_step - 50), "--cooldown-steps", "100", "--n-boot", "40", "--out",
                              str(tmp_path / "re2")])
    assert res.exit_code == 0 and "is replaced by this one" in " ".join(res.stdout.split()), res.output
    scored = runner.invoke(app, ["score", "--prediction", str(tmp_path / "re2"), "--store", str(tmp_path / "s2"),
                                 "--format", "json"])
    assert scored.exit_code == 0 and json.loads(scored.stdout)["warnings"] == [], scored.output


def test_a_run_that_passed_an_edit_of_the_prediction_without_making_it_is_not_taken_for_the_run_predicted(
        predicted, tmp_path):
    """A prediction of the plan with its cut, scored against a run of the same name that trained on past the cut's
    step uncut: +12.9% at 80% and no word of why (the watch says it; the score did not)."""
    import dataclasses
    import json
    import shutil

    hero = micro_plan().hero
    (edit,) = hero.schedule.edits
    uncut = hero.replace(schedule=dataclasses.replace(hero.schedule, edits=()))
    shutil.copytree(predicted / "runs", tmp_path / "runs")
    shutil.rmtree(tmp_path / "runs" / hero.name)
    write_run(tmp_path / "runs", uncut, noise=0.001, seed=9, upto=edit.at_step + 300, state="running")
    assert runner.invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "s")]).exit_code == 0
    args = ["--prediction", str(predicted / "pred"), "--store", str(tmp_path / "s")]
    scored = runner.invoke(app, ["score", *args, "--format", "json"])
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["warnings"][0] == (
        f"{hero.name!r} passed step {edit.at_step:,} without the schedule edit the prediction holds there (its config "
        f"has no edit at that step): it is not the run that was predicted, and its evals past step {edit.at_step:,} "
        f"are held to a curve it did not follow; predict it from its own schedule (`ladder predict --target-run "
        f"{hero.name}`)")
    report = runner.invoke(app, ["report", *args, "--out", str(tmp_path / "report.html")])
    assert report.exit_code == 0, report.output
    import html

    page = " ".join(html.unescape((tmp_path / "report.html").read_text()).split())
    assert f"passed step {edit.at_step:,} without the schedule edit the prediction holds there" in page


def test_a_run_whose_evals_end_before_the_predictions_first_value_is_told_so_not_sent_to_an_earlier_from():
    import pandas as pd

    from ladder.predict.prediction import Prediction
    from ladder.predict.scoring import score_prediction

    steps = np.arange(1_000, 10_001, 1_000)
    med = np.where(steps >= 3_000, 3.0 - 1e-4 * steps, np.nan)  # nothing before the rungs' first shared eval
    table = pd.DataFrame({"step": steps, "tokens": steps * 1000, "fraction": steps / 10_000, "compute": steps * 1e9,
                          "median": med, "lo50": med * 0.99, "hi50": med * 1.01, "lo90": med * 0.97,
                          "hi90": med * 1.03, "in_assumptions": True})
    pred = Prediction("hero", "eval/loss", table, planned_steps=10_000)
    early = pd.Series([4.0, 3.5], index=[500, 900])  # a small run, scored against the hero's prediction
    with pytest.raises(LadderError, match=r"before --from 0.1 and before the prediction has a value \(steps "
                       r"3,000–10,000: it has none before") as err:
        score_prediction(pred, early, start=0.1, run="small")
    with pytest.raises(LadderError, match=r"none of its 2 evals from 1% of the plan on falls where the prediction has a "
                       r"value \(steps 3,000–10,000"):
        score_prediction(pred, early, start=0.01, run="small")
    assert "earlier fraction" not in str(err.value)  # no --from scores it
    with pytest.raises(LadderError, match=r"before --from 0.5; score from an earlier fraction \(--from 0.40\)"):
        score_prediction(pred, pd.Series([3.0, 2.8], index=[2_000, 4_000]), start=0.5)
    assert score_prediction(pred, pd.Series([3.0, 2.8], index=[2_000, 4_000]), start=0.3).n == 1
    # an eval every T // 20 steps: the "40%" one at step 3,998 of 10,000 is scored from 40%, as the report shows it there
    assert score_prediction(pred, pd.Series([2.6, 2.5, 2.4], index=[3_998, 5_000, 6_000]), start=0.4).n == 3
    assert score_prediction(pred, pd.Series([2.6, 2.5, 2.4], index=[3_990, 5_000, 6_000]), start=0.4).n == 2  # 39.9%


def test_plot_and_report_say_they_read_the_store_without_pulling_into_it():
    for command in ("plot", "report"):
        res = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"})
        text = " ".join(res.output.split())
        assert res.exit_code == 0 and "pulled into it" not in text and "as far as it has been pulled" in text


def test_residuals_figure_plots_the_error_as_score_gives_it_and_the_band_on_that_scale():
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    from ladder.output.plots import Curve, residuals
    from ladder.predict.prediction import Prediction

    steps = np.arange(100, 1_001, 100)
    med = np.full(steps.size, 2.0)
    table = pd.DataFrame({"step": steps, "tokens": steps, "fraction": steps / 1_000, "compute": steps * 1e9,
                          "median": med, "lo50": med * 0.99, "hi50": med * 1.01, "lo90": med * 0.96,
                          "hi90": med * 1.05, "in_assumptions": True})
    pred = Prediction("hero", "eval/loss", table, planned_steps=1_000)
    fig = residuals(pred, Curve("hero", steps / 1_000, med / 1.02))  # the run 2% under its prediction
    ax = fig.axes[0]
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "hero")
    assert np.allclose(line.get_ydata(), 2.0)  # predicted / actual − 1: +2%, as `ladder score` says
    band90 = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band90.min() == pytest.approx(100 * (1 / 1.05 - 1)) and band90.max() == pytest.approx(100 * (1 / 0.96 - 1))
    assert "predicted / actual" in ax.get_ylabel()
    plt.close(fig)
    # a run that trains on past the prediction's end (another run followed, a longer plan): no error drawn there,
    # where the last median held flat made one up; `ladder score` scores none of those evals either
    went_on = np.r_[steps, 1_200, 2_000]
    fig = residuals(pred, Curve("hero", went_on / 1_000, np.full(went_on.size, 2.0 / 1.02)))
    y = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "hero").get_ydata()
    assert np.allclose(y[:steps.size], 2.0) and np.isnan(y[steps.size:]).all()
    plt.close(fig)


def test_the_curve_tells_steps_not_predicted_from_steps_outside_the_assumptions():
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    from ladder.output.plots import hero_curve
    from ladder.predict.prediction import Prediction

    steps = np.arange(100, 1_001, 100)
    med = np.r_[np.nan, np.nan, np.full(steps.size - 2, 2.0)]  # none at the first two steps, as predict writes them
    table = pd.DataFrame({"step": steps, "tokens": steps, "fraction": steps / 1_000, "compute": steps * 1e9,
                          "median": med, "lo50": med * 0.99, "hi50": med * 1.01, "lo90": med * 0.96,
                          "hi90": med * 1.05, "in_assumptions": np.r_[[False] * 2, [True] * 5, [False] * 3]})
    fig = hero_curve(Prediction("hero", "eval/loss", table, planned_steps=1_000))
    spans = {p.get_label(): p.get_x() for p in fig.axes[0].patches}
    assert spans == {"not predicted (outside the rungs' evals)": 0.0,
                     "outside assumptions (a change no law models)": pytest.approx(0.7)}
    assert not [line for line in fig.axes[0].lines if line.get_label().startswith("schedule edit")]
    plt.close(fig)
    edited = {"total_steps": 1_000, "edits": [{"kind": "shorten", "at_step": 500, "new_total_steps": 800,
                                               "length": 0, "shape": "linear"}]}
    fig = hero_curve(Prediction("hero", "eval/loss", table, planned_steps=800, schedule=edited))
    [mark] = [line for line in fig.axes[0].lines if line.get_label().startswith("schedule edit")]
    assert mark.get_label() == "schedule edit: shortened at step 500 to 800 steps" and mark.get_xdata()[0] == 0.5
    plt.close(fig)


def test_diagnostics_name_their_quantities_and_a_running_hero_collapses_by_its_predicted_final():
    import matplotlib.pyplot as plt
    import numpy as np

    from ladder.output.plots import HERO, Curve, collapse, diagnostics

    f = np.linspace(0.05, 1.0, 20)
    rungs = [Curve(f"r{i}", f, 2.0 + (1.0 + 0.1 * i) * f**-0.3) for i in range(3)]
    fig = diagnostics(rungs, rungs)
    assert [ax.get_ylabel() for ax in fig.axes] == ["grad norm (global L2)", "MoE drop fraction"]
    plt.close(fig)
    many = [Curve(f"r{i}", f, 2.0 + (1.0 + 0.1 * i) * f**-0.3) for i in range(10)] + [Curve("hero", f, 2.0 + f**-0.3)]
    fig = diagnostics(many, many)  # too many rungs to name each: the smallest and largest rung, and the hero by name
    labels = [ln.get_label() for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")]
    assert labels == ["r0 (smallest of 10)", "r9 (largest)", "hero"]
    assert fig.axes[0].get_lines()[-1].get_color() == HERO and fig.axes[0].get_lines()[-2].get_color() != HERO
    plt.close(fig)
    fig = diagnostics(many[-1:], many[-1:])  # the hero alone (no rung logs these): still in the hero's colour
    assert [ln.get_color() for ln in fig.axes[0].get_lines()] == [HERO]
    plt.close(fig)
    E, final = 2.0, 3.0
    hero = Curve("hero", f[:10], E + (final - E) * f[:10] ** -0.3)  # half way, on the collapsed line
    fig = collapse(rungs, E, hero, hero_final=final)
    (dots,) = [ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("hero")]
    assert np.allclose(dots.get_ydata(), f[:10] ** -0.3) and "predicted final" in dots.get_label()
    plt.close(fig)
    cut = Curve("hero", f[:16], E + (final - E) * f[:16] ** -0.3)  # finished on a plan edited to end at 80%
    fig = collapse(rungs, E, cut)
    (dots,) = [ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("hero")]
    assert dots.get_ydata()[-1] == 1.0 and "plan edited to end at 80%: by its final there" in dots.get_label()
    assert "lower bound" not in fig.axes[0].get_title()
    plt.close(fig)
    fig = collapse(rungs, 0.0)  # E at its bound: the title says so
    assert fig.axes[0].get_title() == "Collapsed curves (E = 0.0000 nats/token, at its lower bound)"
    plt.close(fig)


def test_a_nan_eval_counts_outside_the_bands_and_out_of_the_errors():
    import numpy as np
    import pandas as pd

    from ladder.errors import LadderError
    from ladder.predict.prediction import Prediction
    from ladder.predict.scoring import score_prediction

    steps = np.arange(1, 11) * 100
    med = np.full(steps.size, 3.0)
    table = pd.DataFrame({"step": steps, "tokens": steps, "fraction": steps / 1000, "compute": steps * 1.0,
                          "median": med, "lo50": med - 0.1, "hi50": med + 0.1, "lo90": med - 0.2, "hi90": med + 0.2,
                          "in_assumptions": True})
    pred = Prediction("hero", "eval/loss", table, planned_steps=1000)
    actual = pd.Series(np.full(steps.size, 3.0), index=steps)
    clean = score_prediction(pred, actual, start=0.1)
    assert (clean.n, clean.inside_90, clean.not_finite) == (10, 1.0, 0)
    actual.loc[500] = np.nan
    sc = score_prediction(pred, actual, start=0.1)
    assert (sc.n, sc.not_finite) == (10, 1) and sc.inside_90 == pytest.approx(0.9) and sc.inside_50 == pytest.approx(0.9)
    assert sc.curve_mean_error == 0.0 and ("evals not finite (NaN or inf)", "1: outside both bands, out of the errors") in sc.rows()
    early = actual.copy()
    early.loc[500], early.loc[100] = 3.0, np.inf  # before --from: not scored at all
    assert score_prediction(pred, early, start=0.15).not_finite == 0
    diverged = actual.copy()
    diverged.loc[[900, 1000]] = np.nan  # the latest evals: the last row scored is the last finite one, and says so
    rows = dict(score_prediction(pred, diverged, start=0.1).rows())
    assert "last finite eval (step 800, 80%)" in rows
    assert rows["evals not finite (NaN or inf)"] == "3: outside both bands, out of the errors; the latest, at step 1,000, is one"
    assert "last eval (step 1,000, 100%)" in dict(clean.rows())
    nearly = pd.Series(np.full(steps.size, 3.0), index=np.r_[steps[:-1], 997])  # a run still going at 99.7%
    assert "last eval (step 997, 99.7%)" in dict(score_prediction(pred, nearly, start=0.1).rows())  # not "100%"
    past = pred.at([1000, 1200])  # a step past the table has no prediction, and so is in no assumptions
    assert past["in_assumptions"].tolist() == [True, False] and np.isnan(past["median"].iloc[1])
    short = pd.Series([3.0, 3.0], index=[20, 40])  # another run's evals, on its own shorter plan
    with pytest.raises(LadderError, match=r"its 2 evals end at 4% of the prediction's plan \(1,000 steps\), before --from"):
        score_prediction(pred, short, start=0.1)
    just = pd.Series([3.0, 3.0], index=[50, 99])  # 9.9%: not "at 10% ..., before --from 0.1"
    with pytest.raises(LadderError, match=r"its 2 evals end at 9.9% of the prediction's plan \(1,000 steps\), before --from"):
        score_prediction(pred, just, start=0.1)


def test_report_and_plot_follow_the_run_watch_followed(predicted, tmp_path):
    import json
    import shutil

    hero = micro_plan().hero.name
    folder = tmp_path / "pred"
    shutil.copytree(predicted / "pred", folder)
    meta = json.loads((folder / "prediction.json").read_text())
    meta["run_name"] = "hero-plan-v2"  # a prediction made from a target file of another name
    (folder / "prediction.json").write_text(json.dumps(meta))
    store = str(predicted / "store")
    watched = runner.invoke(app, ["watch", "--prediction", str(folder), "--store", store, "--target-run", hero, "--once"])
    assert watched.exit_code in (0, 4), watched.output
    report = ["report", "--prediction", str(folder), "--store", store, "--out", str(tmp_path / "r.html")]
    lost = runner.invoke(app, report)
    assert lost.exit_code == 2 and f"give --target-run {hero}" in " ".join(lost.output.split())
    res = runner.invoke(app, [*report, "--target-run", hero])
    assert res.exit_code == 0, res.output
    assert "Latest verdict" in (tmp_path / "r.html").read_text()
    figs = runner.invoke(app, ["plot", "--prediction", str(folder), "--store", store, "--target-run", hero,
                               "--out", str(tmp_path / "f")])
    assert figs.exit_code == 0, figs.output


def test_a_report_of_another_run_leaves_out_the_watched_runs_verdicts_and_alerts(predicted, tmp_path):
    """The watch beside the prediction followed the hero; a report of a rung against the same prediction shows
    neither the hero's verdicts nor its alerts, and says why, where it used to be refused."""
    import json
    import shutil

    from ladder.watch.sinks import read_alerts

    plan = micro_plan()
    folder = tmp_path / "pred"
    shutil.copytree(predicted / "pred", folder)
    store = str(predicted / "store")
    watched = runner.invoke(app, ["watch", "--prediction", str(folder), "--store", store, "--once"])
    assert watched.exit_code in (0, 4, 5), watched.output
    hero, rung = plan.hero.name, plan.rungs[-1].name
    with (folder / "alerts.jsonl").open("a") as f:  # an alert of the hero's watch, and one of a watch of the rung
        f.write(json.dumps({"kind": "alert", "run": hero, "step": 5, "level": "alarm", "rule": "non_finite",
                            "message": "the hero's own"}) + "\n")
        f.write(json.dumps({"kind": "alert", "run": rung, "step": 7, "level": "warning", "rule": "off_band",
                            "message": "the rung's own"}) + "\n")
    lines = [json.loads(x) for x in (folder / "alerts.jsonl").read_text().splitlines()]
    assert {x.get("run") for x in lines} == {hero, rung}  # every line the watch wrote names its run
    assert [a["message"] for a in read_alerts(folder / "alerts.jsonl", rung)] == ["the rung's own"]
    report = ["report", "--prediction", str(folder), "--store", store]
    other = runner.invoke(app, [*report, "--target-run", rung, "--out", str(tmp_path / "rung.html")])
    assert other.exit_code == 0, other.output
    page = (tmp_path / "rung.html").read_text()
    assert "the rung&#x27;s own" in page and "the hero&#x27;s own" not in page and "Latest verdict" not in page
    assert f"followed &#x27;{hero}&#x27;, not &#x27;{rung}&#x27;" in page
    # the page names the run predicted beside the run followed, and says as `ladder score` does that it is a rung
    assert f"<h1>{rung}: progress against the prediction of {hero}</h1>" in page
    assert f"<title>{rung}: progress against the prediction of {hero}</title>" in page
    assert (f"&#x27;{rung}&#x27; is one of the rungs the prediction was made from, not its target "
            f"&#x27;{hero}&#x27;") in page
    own = runner.invoke(app, [*report, "--out", str(tmp_path / "hero.html")])
    assert own.exit_code == 0, own.output
    page = (tmp_path / "hero.html").read_text()
    assert "Latest verdict" in page and "the hero&#x27;s own" in page and "the rung&#x27;s own" not in page
    assert "not this run" not in page


def test_the_figures_show_the_rungs_and_the_law_wherever_the_target_lies(predicted):
    """The hero-curve's y-range holds the rungs and the curve after the first 10% of the run, not the bands of
    its first steps (or of a far extrapolation); the ladder fit's law reaches a target smaller than every rung."""
    import matplotlib.pyplot as plt
    import numpy as np

    from ladder.output import plots
    from ladder.predict.prediction import Prediction

    pred = Prediction.load(predicted / "pred")
    t = pred.table
    wide = dataclasses.replace(pred, table=t.assign(lo90=t["lo90"] - 50 * (t["fraction"] < 0.1), hi90=t["hi90"] + 1e4))
    f = np.linspace(0.05, 1, 20)
    high = plots.Curve("small rung", f, float(t["median"].iloc[-1]) + 2 + 1 / f)
    fig = plots.hero_curve(wide, rungs=[high])
    lo, hi = fig.axes[0].get_ylim()
    assert fig.axes[0].get_title().endswith("predicted (no actual value yet)")  # no actual given
    fig.canvas.draw()  # the legend beside the curves, not over the smallest rung's end (upper right)
    assert fig.axes[0].get_legend().get_window_extent().x0 >= fig.axes[0].get_window_extent().x1
    assert fig.axes[0].get_legend().get_window_extent().x1 <= fig.bbox.x1 + 1
    plt.close(fig)
    late = t["fraction"] >= 0.1
    assert lo <= float(t["median"][late].min()) and hi >= float(high.value[f >= 0.1].max())
    assert lo > -1 and hi < 2 * float(high.value[f >= 0.1].max())  # not the band's −50 or +1e4

    rungs = [plots.Curve(f"r{i}", f, 3 - 0.1 * i + 0 * f, compute=10.0 ** (18 + i)) for i in range(3)]
    fig = plots.ladder_fit(rungs, lambda c: 2 + (c / 1e15) ** -0.1, pred, hero_compute=1e15)
    line = fig.axes[0].lines[0].get_xdata()
    plt.close(fig)
    assert line.min() < 1e15 and line.max() > 1e20


def test_a_prediction_drawn_against_another_ladders_store_is_refused(predicted, tmp_path):
    """The prediction keeps the names of its rungs: a store that holds none of them is another ladder's (its
    figures would put the target beside rungs it was not predicted from)."""
    from ladder.data.sources.pull import pull
    from ladder.data.store import Store
    from ladder.predict.prediction import Prediction
    from tests.test_store import MemorySource, runs3

    pred = Prediction.load(predicted / "pred")
    assert len(pred.rungs) >= 3 and not set(pred.rungs) & {"rung-1", "rung-2", "rung-3"}
    other = tmp_path / "other"
    pull(Store(other), MemorySource(runs3()))
    for args in (["plot", "--out", str(tmp_path / "figs")], ["report", "--out", str(tmp_path / "r.html")]):
        res = runner.invoke(app, [*args, "--prediction", str(predicted / "pred"), "--store", str(other)])
        assert res.exit_code == 2, res.output
        assert "holds none of the rungs the prediction" in res.output and pred.rungs[0] in res.output
    assert not (tmp_path / "figs").exists() and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("damage, says", [
    (lambda t: t.clear(), "its table has no rows"),
    (lambda t: [r.pop("lo90") for r in t], "its table has no column 'lo90'"),
    (lambda t: t[3].update(step="277x"), "'277x'"),
    (lambda t: t.reverse(), "its steps are not whole numbers rising from row to row"),
], ids=["empty", "no-lo90", "text-step", "reversed"])
def test_a_damaged_prediction_file_is_named_by_every_command_that_reads_it(predicted, tmp_path, damage, says):
    import json

    data = json.loads((predicted / "pred" / "prediction.json").read_text())
    damage(data["table"])
    (tmp_path / "pred").mkdir()
    (tmp_path / "pred" / "prediction.json").write_text(json.dumps(data))
    store = str(predicted / "store")
    for args in (["score", "--prediction", str(tmp_path / "pred"), "--store", store],
                 ["report", "--prediction", str(tmp_path / "pred"), "--store", store, "--out", str(tmp_path / "r.html")],
                 ["plot", "--prediction", str(tmp_path / "pred"), "--store", store, "--out", str(tmp_path / "f")]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert "prediction.json: not a prediction file (" in res.output and says in res.output, res.output


def test_a_blank_median_and_an_alert_without_its_step_still_make_a_report(predicted, tmp_path):
    import json

    data = json.loads((predicted / "pred" / "prediction.json").read_text())
    for row in data["table"][:5]:
        row["median"] = None  # a prediction with no value at its first steps
    (tmp_path / "pred").mkdir()
    (tmp_path / "pred" / "prediction.json").write_text(json.dumps(data))
    alerts = tmp_path / "alerts.jsonl"
    alerts.write_text(json.dumps({"time": 1, "kind": "alert", "level": "warning", "rule": "deviation", "message": "m"}) + "\n")
    res = runner.invoke(app, ["report", "--prediction", str(tmp_path / "pred"), "--store", str(predicted / "store"),
                              "--out", str(tmp_path / "r.html"), "--alerts", str(alerts)])
    assert res.exit_code == 0, res.output
    assert "deviation" in (tmp_path / "r.html").read_text()


def test_outputs_are_never_written_into_the_metric_store(predicted):
    store = predicted / "store"
    before = sorted(p.name for p in store.rglob("*"))
    for args in (["plot", "--prediction", str(predicted / "pred"), "--store", str(store), "--out", str(store)],
                 ["plot", "--prediction", str(predicted / "pred"), "--store", str(store), "--out", str(store / "history")],
                 ["predict", str(predicted / "hero.yaml"), "--store", str(store), "--out", str(store), "--n-boot", "20"],
                 # a folder not made yet, inside the store: refused the first time, not only once it exists
                 ["plot", "--prediction", str(predicted / "pred"), "--store", str(store), "--out", str(store / "figs")],
                 ["predict", str(predicted / "hero.yaml"), "--store", str(store), "--out", str(store / "p" / "q"),
                  "--n-boot", "20"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "the metric store" in res.output and "give a folder of its own" in res.output, res.output
    for name in ("r.html", "history/r.html", "sub/r.html"):  # a new file anywhere in the store, not only its own files
        res = runner.invoke(app, ["report", "--prediction", str(predicted / "pred"), "--store", str(store),
                                  "--out", str(store / name)])
        assert res.exit_code == 2 and "is in the metric store" in res.output and "give a path outside it" in res.output
    assert sorted(p.name for p in store.rglob("*")) == before


def test_a_target_run_not_in_the_store_is_refused_as_score_refuses_it(predicted, tmp_path):
    base = ["--prediction", str(predicted / "pred"), "--store", str(predicted / "store")]
    follow = ["--target-run", "typo-hero"]
    for args in (["report", *base, *follow, "--out", str(tmp_path / "r.html")],
                 ["plot", *base, *follow, "--out", str(tmp_path / "f")], ["score", *base, "--run", "typo-hero"],
                 ["score", *base, *follow]):  # score's --run goes by the name the others give it too
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "no run 'typo-hero' in" in res.output, (args, res.output)
    assert not (tmp_path / "r.html").exists()


def test_a_target_the_store_holds_twice_is_refused_as_score_refuses_it(predicted, tmp_path):
    import shutil

    hero = micro_plan().hero
    store = tmp_path / "store"
    shutil.copytree(predicted / "store", store)
    (tmp_path / "copy.csv").write_text("run,step,loss\nhero-copy,10,3.0\n")  # another id under the hero's name
    res = runner.invoke(app, ["import", "csv", str(tmp_path / "copy.csv"), "--run", "run", "--step", "step",
                              "--metric", "eval/loss=loss", "--coord", f"name={hero.name}", "--coord", "group=other",
                              "--coord", f"active_params={hero.spec.active_params()}", "--coord",
                              f"stop_after_steps={hero.stop_after_steps}", "--coord",
                              f"tokens_per_step={hero.tokens_per_step}", "--store", str(store)])
    assert res.exit_code == 0, res.output
    base = ["--prediction", str(predicted / "pred"), "--store", str(store)]
    for args in (["report", *base, "--out", str(tmp_path / "r.html")], ["plot", *base, "--out", str(tmp_path / "f")],
                 ["score", *base]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and f"run name '{hero.name}' is ambiguous" in res.output, (args, res.output)
    assert not (tmp_path / "r.html").exists()


def test_a_run_that_logs_nan_is_said_to_in_the_report_and_marked_in_the_figure(predicted, tmp_path):
    import json
    import shutil

    import numpy as np

    plan = micro_plan()
    shutil.copytree(predicted / "runs", tmp_path / "runs")
    half = plan.hero.stop_after_steps // 2
    last_evals = [s for s in plan.hero.eval_steps() if s <= half][-2:]
    write_run(tmp_path / "runs", plan.hero, noise=0.001, seed=9, upto=half, state="running",
              shift=lambda s: np.nan if s in last_evals else 0.0)  # diverged: its last two evals are NaN
    assert runner.invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "store")]).exit_code == 0
    res = runner.invoke(app, ["report", "--prediction", str(predicted / "pred"), "--store", str(tmp_path / "store"),
                              "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text()
    assert (f"logged 2 evals that are not a finite number (NaN or inf), the last at step {last_evals[-1]:,} "
            "(its latest eval)") in page
    assert "<p>Actual at its latest finite eval: " in page and "Actual at its latest eval" not in page
    scored = runner.invoke(app, ["score", "--prediction", str(predicted / "pred"), "--store", str(tmp_path / "store"),
                                 "--format", "json"])
    sc = json.loads(scored.stdout)
    assert sc["not_finite"] == 2  # the report's score is `ladder score`'s, the NaN evals counted
    assert f'evals scored</td><td class="">{sc["n"]}</td>' in page and "evals not finite (NaN or inf)</td>" in page
    from ladder.data.store import Store
    from ladder.output.figures import hero_actual
    from ladder.predict.prediction import Prediction

    logged = hero_actual(Store(tmp_path / "store"), Prediction.load(predicted / "pred"), nonfinite=True)
    assert np.isnan(logged.loc[last_evals]).all() and np.isfinite(hero_actual(Store(tmp_path / "store"),
                                                                               Prediction.load(predicted / "pred"))).all()


def test_plot_leaves_no_figure_of_an_earlier_ladder_beside_this_ones(tmp_path, monkeypatch):
    from ladder.output import figures, plots

    out = tmp_path / "figs"
    out.mkdir()
    for name in figures.FIGURES:
        for kind in ("png", "svg"):
            (out / f"{name}.{kind}").write_text(f"an earlier ladder's ({plots.FIGURE_TAG})")
    (out / "notes.txt").write_text("mine")
    (out / "residuals.svg").write_text("mine too: a figure of the user's own under a name ladder draws")

    def only_the_curve(store, pred, stage, group, predicted_as):  # a ladder whose runs give only the hero's curve
        return [(stage / f"hero_curve.{kind}") for kind in ("png", "svg") if (stage / f"hero_curve.{kind}").write_text("new")]

    monkeypatch.setattr(figures, "_draw", only_the_curve)
    drawn = figures.draw_all(None, None, out)
    assert sorted(p.name for p in out.iterdir()) == ["hero_curve.png", "hero_curve.svg", "notes.txt", "residuals.svg"]
    assert (out / "residuals.svg").read_text().startswith("mine too")
    assert [p.read_text() for p in drawn] == ["new", "new"]


def test_a_report_refused_for_its_alerts_file_writes_no_figures(predicted, tmp_path):
    (tmp_path / "alerts.csv").write_text("step,loss\n1,2\n")
    res = runner.invoke(app, ["report", "--prediction", str(predicted / "pred"), "--store", str(predicted / "store"),
                              "--out", str(tmp_path / "r.html"), "--alerts", str(tmp_path / "alerts.csv")])
    assert res.exit_code == 2 and "not a watcher's alerts file" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alerts.csv"]
    for path, what in ((tmp_path, "a folder"), (Path("/dev/null"), "not a regular file"),
                       (tmp_path / "gone.jsonl", "no such file")):  # each said as it is
        res = runner.invoke(app, ["report", "--prediction", str(predicted / "pred"), "--store",
                                  str(predicted / "store"), "--out", str(tmp_path / "r.html"), "--alerts", str(path)])
        assert res.exit_code == 2 and f"--alerts {path}: {what}; give the alerts.jsonl" in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alerts.csv"]


def test_score_warns_of_a_run_of_another_group_and_of_evals_past_the_prediction(predicted, tmp_path):
    import json
    import shutil

    plan = micro_plan()
    shutil.copytree(predicted / "store", tmp_path / "store")
    other = dataclasses.replace(plan.hero, name="other-ladder-hero", group="another-ladder")
    write_run(tmp_path / "runs", other, noise=0.001, seed=5)  # the same plan, another ladder, trained to the end
    assert runner.invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "store")]).exit_code == 0
    res = runner.invoke(app, ["score", "--prediction", str(predicted / "pred"), "--store", str(tmp_path / "store"),
                              "--run", other.name, "--format", "json"])
    assert res.exit_code == 0, res.output
    (w,) = json.loads(res.stdout)["warnings"]
    assert f"is of group 'another-ladder' and the prediction's rungs of '{plan.hero.group}'" in w
    short = json.loads((predicted / "pred" / "prediction.json").read_text())
    short["table"] = short["table"][: len(short["table"]) // 4]  # a prediction that ends before the run has come
    (tmp_path / "short").mkdir()
    (tmp_path / "short" / "prediction.json").write_text(json.dumps(short))
    res = runner.invoke(app, ["score", "--prediction", str(tmp_path / "short"), "--store", str(tmp_path / "store"),
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    [w] = [w for w in json.loads(res.stdout)["warnings"] if "not scored" in w]
    assert f"after step {short['table'][-1]['step']:,}, where the prediction ends" in w


def test_a_steps_edited_fraction_is_of_the_plan_in_force_at_that_step():
    import numpy as np
    import pandas as pd

    from ladder.predict.prediction import Prediction

    steps = np.arange(100, 8_001, 100)  # planned 10,000 steps, cut at step 5,000 to 8,000
    med = 3.0 - 1e-4 * steps
    table = pd.DataFrame({"step": steps, "tokens": steps * 1000, "fraction": steps / 10_000,
                          "fraction_edited": np.where(steps <= 5_000, steps / 10_000, steps / 8_000),
                          "compute": steps * 1e9, "median": med, "lo50": med, "hi50": med, "lo90": med, "hi90": med,
                          "in_assumptions": True})
    pred = Prediction("hero", "eval/loss", table, planned_steps=10_000)
    assert pred.fraction_label(500, 8_000) == "5%"  # before the cut the plan in force was the first
    assert pred.fraction_label(6_000, 8_000) == "60% of the plan, 75% of the edited plan"
    # to a tenth where it is no whole one, as the report's table: two evals 1% apart are not both "62%"
    assert [pred.fraction_label(s) for s in (992, 6_150, 6_250)] == ["9.9%", "61.5% of the plan, 76.9% of the edited plan",
                                                                     "62.5% of the plan, 78.1% of the edited plan"]


def test_a_prediction_saved_over_another_is_all_old_or_all_new(predicted, tmp_path, monkeypatch):
    import shutil

    import pandas as pd

    from ladder.predict.prediction import PREDICTION_FILES, Prediction

    shutil.copytree(predicted / "pred", tmp_path / "pred")
    before = {n: (tmp_path / "pred" / n).read_bytes() for n in PREDICTION_FILES}
    pred = Prediction.load(tmp_path / "pred")
    newer = dataclasses.replace(pred, table=pred.table.assign(median=pred.table["median"] * 1.01))

    def broken(*args, **kwargs):
        raise KeyboardInterrupt  # stopped after the parquet file was written aside

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(KeyboardInterrupt):
        newer.save(tmp_path / "pred")
    assert {n: (tmp_path / "pred" / n).read_bytes() for n in PREDICTION_FILES} == before
    assert sorted(p.name for p in (tmp_path / "pred").iterdir()) == sorted(before)  # no temporary file left


def test_the_report_table_shows_the_eval_nearest_each_mark_of_the_run():
    """Predicted every 202 steps of 20,162, evals every 200: the 55% row is the eval at 11,000 (54.6%), nearest
    11,089, not the one at 11,200 nearest the predicted step 11,110 (55.1%) nearest the mark."""
    import numpy as np
    import pandas as pd

    from ladder.output.report import prediction_rows
    from ladder.predict.prediction import Prediction

    T = 20_162
    steps = np.r_[np.arange(202, T, 202), T]  # a target file's default: every 1% of the plan, rounded (202 steps)
    f = steps / T
    med = 3.0 + f ** -0.2
    table = pd.DataFrame({"step": steps, "tokens": steps * 1000, "fraction": f, "fraction_edited": f,
                          "compute": steps * 1e12, "median": med, "lo50": med * 0.99, "hi50": med * 1.01,
                          "lo90": med * 0.98, "hi90": med * 1.02, "in_assumptions": True})
    pred = Prediction("hero", "eval/loss", table, planned_steps=T)
    evals = np.arange(200, T + 1, 200)
    actual = pd.Series(3.0 + (evals / T) ** -0.2, index=evals)
    rows = prediction_rows(pred, actual)
    assert 11_000 in set(rows["step"]) and 11_200 not in set(rows["step"])
    assert list(rows["step"]) == sorted(set(rows["step"]))  # in step order, one row each
    # each row says the share of the run its eval is at: 54.6%, not "55%"; 9.9% (step 2,000), not the "10%" from
    # which the score's worst |error| counts
    shown = dict(zip(rows["step"], rows["fraction"]))
    assert shown[11_000] == "54.6%" and shown[2_000] == "9.9%" and shown[20_000] == "99.2%"
    assert len(rows) == 20


def test_figures_draw_the_rungs_the_prediction_was_made_from_and_say_what_they_lack(predicted, tmp_path):
    import json
    import shutil

    plan = micro_plan()
    shutil.copytree(predicted / "store", tmp_path / "store")
    own = dataclasses.replace(plan.hero, name="hero-own-group", group="heroes")  # a hero in a group of its own
    write_run(tmp_path / "runs", own, noise=0.001, seed=9, upto=own.stop_after_steps // 2, state="running")
    assert runner.invoke(app, ["pull", "local", str(tmp_path / "runs"), "--store", str(tmp_path / "store")]).exit_code == 0
    base = ["--prediction", str(predicted / "pred"), "--store", str(tmp_path / "store")]
    res = runner.invoke(app, ["plot", *base, "--target-run", own.name, "--out", str(tmp_path / "figs")])
    assert res.exit_code == 0, res.output  # was: no rungs of group 'heroes' to draw
    assert (tmp_path / "figs" / "ladder_fit.png").is_file() and "warning" not in res.output
    # a run of another plan followed: said; an alerts file of another run's watch: refused
    rung = plan.rungs[-1]
    res = runner.invoke(app, ["plot", *base, "--target-run", rung.name, "--out", str(tmp_path / "figs2")])
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and f"'{rung.name}' plans {rung.stop_after_steps:,} steps and the prediction in" in said
    assert "compared with the prediction at their own steps, as `ladder score` scores them" in said
    alerts = tmp_path / "alerts.jsonl"
    alerts.write_text(json.dumps({"kind": "alert", "run": plan.hero.name, "step": 5, "level": "alarm",
                                  "rule": "non_finite", "message": "the hero's own"}) + "\n")
    res = runner.invoke(app, ["report", *base, "--target-run", own.name, "--alerts", str(alerts),
                              "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and f"its alerts are of '{plan.hero.name}', none of '{own.name}'" in " ".join(res.output.split())
    assert not (tmp_path / "r.html").exists()
    res = runner.invoke(app, ["report", *base, "--out", str(tmp_path / "pages") + "/"])  # a folder meant: refused
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "give the HTML file to write, e.g." in said and "report.html (a name without" in said
    assert not (tmp_path / "pages").exists()
    res = runner.invoke(app, ["report", *base, "--out", str(tmp_path / "r.png")])  # a page under another kind's name
    assert res.exit_code == 2 and "give a name ending in .html, e.g." in " ".join(res.output.split())
    assert not (tmp_path / "r.png").exists() and not (tmp_path / "r_figures").exists()
    # a store that lacks one of the rungs: the figures of the ladder may go, and the warning says why
    shutil.copytree(predicted / "runs", tmp_path / "fewer")
    shutil.rmtree(tmp_path / "fewer" / plan.rungs[0].name)
    assert runner.invoke(app, ["pull", "local", str(tmp_path / "fewer"), "--store", str(tmp_path / "s3")]).exit_code == 0
    res = runner.invoke(app, ["plot", "--prediction", str(predicted / "pred"), "--store", str(tmp_path / "s3"),
                              "--out", str(tmp_path / "figs3")])
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and f"holds {len(plan.rungs) - 1} of the {len(plan.rungs)} rungs the prediction was made " \
        f"from (not {plan.rungs[0].name})" in said


def test_each_stretch_outside_the_assumptions_is_shaded_on_its_own(predicted):
    import numpy as np

    from ladder.output import plots
    from ladder.predict.prediction import Prediction

    assert plots._spans(np.array([1, 1, 0, 0, 1, 0, 1], bool)) == [(0, 1), (4, 4), (6, 6)]
    assert plots._spans(np.zeros(3, bool)) == []
    pred = Prediction.load(predicted / "pred")
    n = len(pred.table)
    flags = np.ones(n, bool)
    flags[:2] = flags[-3:] = False  # the first evals not predicted, and a change late in the run
    pred = dataclasses.replace(pred, table=pred.table.assign(in_assumptions=flags))
    ax = plots.hero_curve(pred).axes[0]
    f = pred.table["fraction"].to_numpy()
    grey = [p for p in ax.patches if np.allclose(p.get_facecolor()[:3], (0.85, 0.85, 0.85))]
    extents = sorted((round(p.get_bbox().x0, 9), round(p.get_bbox().x1, 9)) for p in grey)
    # not one span over all; each reaches the evals inside the assumptions on either side (the run's start, its end)
    assert extents == [(0.0, round(f[2], 9)), (round(f[-4], 9), round(f[-1], 9))]
    flags[:] = True
    flags[-1] = False  # one eval outside, the last: a span one eval wide, not none
    ax = plots.hero_curve(dataclasses.replace(pred, table=pred.table.assign(in_assumptions=flags))).axes[0]
    grey = [p for p in ax.patches if np.allclose(p.get_facecolor()[:3], (0.85, 0.85, 0.85))]
    assert [(round(p.get_bbox().x0, 9), round(p.get_bbox().x1, 9)) for p in grey] == [(round(f[-2], 9), round(f[-1], 9))]


def test_the_report_scores_the_run_so_far_and_marks_the_evals_outside_the_bands(predicted, tmp_path):
    import pandas as pd

    from ladder.data.store import Store
    from ladder.output.figures import hero_actual
    from ladder.output.report import OUTSIDE, prediction_rows, write_report
    from ladder.predict.prediction import Prediction
    from ladder.predict.scoring import score_prediction

    pred = Prediction.load(predicted / "pred")
    actual = hero_actual(Store(predicted / "store"), pred)
    rows = prediction_rows(pred, actual)
    seen = rows[rows["actual"] != "–"]
    assert len(seen) >= 5
    for _, r in seen.iterrows():  # the narrowest band that holds each actual value
        y, at = float(actual.loc[r["step"]]), pred.at([r["step"]]).iloc[0]
        lo50, hi50, lo90, hi90 = (at[k] for k in ("lo50", "hi50", "lo90", "hi90"))
        want = "the 50% band" if lo50 <= y <= hi50 else "the 90% band" if lo90 <= y <= hi90 else OUTSIDE
        assert r["actual in"] == want
    off = actual.copy()
    off.iloc[-1] *= 1.5  # the latest eval far above every band
    page = write_report(tmp_path / "r.html", pred, [], off).read_text()
    assert f'<td class="alarm">{OUTSIDE}</td>' in page
    assert "Each row at the run's eval nearest the mark" in page
    sc = score_prediction(pred, off)
    assert "score so far" in page and f"inside the 90% band</td><td class=\"\">{sc.inside_90:.0%}</td>" in page
    assert f"{sc.last_error:+.2%}" in page
    assert pd.isna(prediction_rows(pred).get("actual in", pd.Series([None])).iloc[0])  # no actual: no such column
    assert "has logged no" not in page
    page = write_report(tmp_path / "r0.html", pred, [], actual.iloc[:0]).read_text()  # the run started, no eval yet
    assert f"The run has logged no {pred.metric} yet" in page and "score so far" not in page


def test_the_dynamics_title_is_wrapped_to_the_figure():
    """One panel (a hero whose rungs log only the train loss) makes a narrow figure: its title, on one line,
    was cut at both edges."""
    import matplotlib.pyplot as plt

    from ladder.output.plots import dynamics
    from ladder.predict.dynamics import Dynamics

    fig = dynamics(Dynamics("hero-150M-with-a-long-name", 2.7e18, (), None))
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width and "\n" in fig._suptitle.get_text()
    plt.close(fig)


def test_the_backtest_table_shows_the_absolute_final_error_the_score_uses_where_several_runs_are_held_out():
    import pandas as pd

    from ladder.output.report import backtest_rows
    from ladder.predict.prediction import Prediction

    table = pd.DataFrame({"step": [10], "tokens": [100], "fraction": [1.0], "compute": [1e9], "median": [3.0],
                          "lo50": [2.9], "hi50": [3.1], "lo90": [2.8], "hi90": [3.2], "in_assumptions": [True]})
    rec = {"method": "ensemble", "held_out": ["a", "b"], "size_ratio": 1.6, "final_error": -0.0008,
           "final_abs_error": 0.00096, "mean_abs_error": 0.0021, "coverage90": 1.0, "evals": 20, "failed": ""}
    rows = backtest_rows(Prediction("hero", "eval/loss", table, planned_steps=10, method="ensemble", backtest=[rec]))
    row = rows.iloc[0]  # the score, 0.15%, is the mean of the two columns it names: 0.096% and 0.21%
    assert (row["final error (mean)"], row["|final error| (mean)"], row["mean |error|"]) == ("-0.08%", "0.10%", "0.21%")
    one = backtest_rows(Prediction("hero", "eval/loss", table, planned_steps=10, method="ensemble",
                                   backtest=[{**rec, "held_out": ["a"], "final_abs_error": 0.0008}]))
    assert one.iloc[0]["final error"] == "-0.08%" and "|final error| (mean)" not in one
    assert row["size ratio (FLOPs per token)"] == "1.60×"  # the held-out size over the largest fitted one, per token


def test_the_ladder_figure_shows_a_hero_whose_last_eval_falls_a_few_steps_short_of_the_plan(predicted, tmp_path,
                                                                                          monkeypatch):
    """A trainer that evaluates every k steps logs its last eval a few steps before the plan's end when k does not
    divide it (step 71,936 of 72,000 for k = 128): that eval is the run's final, as `ladder score` counts it, and the
    ladder figure draws it beside the prediction."""
    import json
    import shutil

    from ladder.data.store import Store
    from ladder.output import figures
    from ladder.predict.prediction import Prediction

    plan = micro_plan()
    runs = tmp_path / "runs"
    shutil.copytree(predicted / "runs", runs)
    hero = write_run(runs, plan.hero, noise=0.001, seed=9)
    T = plan.hero.stop_after_steps
    lines = [json.loads(x) for x in (hero / "metrics.jsonl").read_text().splitlines()]
    for x in lines:
        if x["step"] == T and "eval/loss" in x:
            x["step"] = T - 2  # the last eval two steps before the end
    lines.sort(key=lambda x: x["step"])
    (hero / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert runner.invoke(app, ["pull", "local", str(runs), "--store", str(tmp_path / "store")]).exit_code == 0
    seen = []
    drawn = figures.plots.ladder_fit
    monkeypatch.setattr(figures.plots, "ladder_fit", lambda *a, **k: seen.append(a[4]) or drawn(*a, **k))
    figures.draw_all(Store(tmp_path / "store"), Prediction.load(predicted / "pred"), tmp_path / "figs")
    last = figures.hero_actual(Store(tmp_path / "store"), Prediction.load(predicted / "pred"))
    assert last.index[-1] == T - 2 and seen == [pytest.approx(float(last.iloc[-1]))]


def test_figures_of_the_ladder_left_out_for_rungs_still_training_are_said_to_be(predicted, tmp_path):
    import json
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(predicted / "runs", runs)
    rungs = [r.name for r in micro_plan().rungs]
    for name in rungs[1:]:  # one rung finished; the others still train (as far as their status says)
        status = json.loads((runs / name / "status.json").read_text())
        (runs / name / "status.json").write_text(json.dumps({**status, "state": "running"}))
    assert runner.invoke(app, ["pull", "local", str(runs), "--store", str(tmp_path / "store")]).exit_code == 0
    res = runner.invoke(app, ["plot", "--prediction", str(predicted / "pred"), "--store", str(tmp_path / "store"),
                              "--out", str(tmp_path / "figs")])
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and not (tmp_path / "figs" / "ladder_fit.png").exists(), res.output
    assert (f"warning: the ladder fit and the collapsed curves are not drawn: they need 3 rungs that finished their "
            f"plans, and 1 of the {len(rungs)} rungs in the store did") in said


def test_the_ladder_figure_shows_the_eval_at_the_prediction_s_end_of_a_run_that_trained_on(predicted, tmp_path,
                                                                                          monkeypatch):
    """A run followed past the end of the prediction (a longer plan, another run): the ladder figure's "actual" is
    its eval at the prediction's last step, where `ladder score` ends, not its last eval, twice the tokens on."""
    from ladder.data.store import Store
    from ladder.output import figures
    from ladder.predict.prediction import Prediction

    pred = Prediction.load(predicted / "pred")
    store = Store(predicted / "store")
    actual = figures.hero_actual(store, pred)
    cut = int(actual.index[len(actual) // 2])
    short = dataclasses.replace(pred, table=pred.table[pred.table["step"] <= cut].reset_index(drop=True))
    seen = []
    drawn = figures.plots.ladder_fit
    monkeypatch.setattr(figures.plots, "ladder_fit", lambda *a, **k: seen.append(a[4]) or drawn(*a, **k))
    figures.draw_all(store, short, tmp_path / "figs")
    assert seen == [pytest.approx(float(actual[cut]))] and float(actual[cut]) != float(actual.iloc[-1])


def test_score_from_0_says_the_evals_before_the_prediction_starts_are_not_scored(predicted, tmp_path):
    import json

    from ladder.data.store import Store
    from ladder.output.figures import hero_actual
    from ladder.predict.prediction import Prediction

    pred = Prediction.load(predicted / "pred")
    actual = hero_actual(Store(predicted / "store"), pred)
    first = int(actual.index[3])  # a prediction with no value before the run's fourth eval (the rungs' first shared)
    table = pred.table.copy()
    table.loc[table["step"] < first, ["median", "lo50", "hi50", "lo90", "hi90"]] = np.nan
    dataclasses.replace(pred, table=table).save(tmp_path / "p")
    score = ["score", "--prediction", str(tmp_path / "p"), "--store", str(predicted / "store"), "--format", "json"]
    res = runner.invoke(app, [*score, "--from", "0"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["warnings"] == [
        f"3 evals of '{pred.run_name}' before step {first:,}, where the prediction starts, are not scored (the laws "
        "predict no step before the rungs' first shared eval)"]
    late = runner.invoke(app, [*score, "--from", f"{first / pred.started_with:.6f}"])  # from there on: none left out
    assert late.exit_code == 0 and json.loads(late.stdout)["warnings"] == [], late.output


def test_score_says_a_run_that_ended_before_the_prediction_does_is_scored_only_so_far(predicted, tmp_path):
    import json
    import shutil

    hero = micro_plan().hero.name
    runs = tmp_path / "runs"
    shutil.copytree(predicted / "runs", runs)
    status = json.loads((runs / hero / "status.json").read_text())  # its evals end half way, and it says finished
    (runs / hero / "status.json").write_text(json.dumps({**status, "state": "finished"}))
    assert runner.invoke(app, ["pull", "local", str(runs), "--store", str(tmp_path / "store")]).exit_code == 0
    score = ["score", "--prediction", str(predicted / "pred"), "--format", "json"]
    res = runner.invoke(app, [*score, "--store", str(tmp_path / "store")])
    said = json.loads(res.stdout)["warnings"]
    assert res.exit_code == 0 and [w for w in said if w.startswith(f"'{hero}' is finished and its evals end at step ")]
    assert "its score stops there and says nothing of its final" in said[-1]
    running = runner.invoke(app, [*score, "--store", str(predicted / "store")])  # still running: nothing to say
    assert running.exit_code == 0 and not [w for w in json.loads(running.stdout)["warnings"] if "says nothing" in w]


def test_the_report_says_what_ladder_score_says_with_its_score(predicted, tmp_path):
    """The page's "score so far (as `ladder score`)" carries the score's warnings: evals past where the prediction
    ends are not scored (the page gave the score alone, as if every eval were in it)."""
    from ladder.data.store import Store
    from ladder.output.figures import hero_actual
    from ladder.predict.prediction import Prediction

    pred = Prediction.load(predicted / "pred")
    actual = hero_actual(Store(predicted / "store"), pred)
    cut = int(actual.index[len(actual) // 2])  # a prediction that ends half way through the run's evals so far
    dataclasses.replace(pred, table=pred.table[pred.table["step"] <= cut].reset_index(drop=True)).save(tmp_path / "p")
    res = runner.invoke(app, ["report", "--prediction", str(tmp_path / "p"), "--store", str(predicted / "store"),
                              "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    past = int((actual.index > cut).sum())
    said = (f"{past} evals of &#x27;{pred.run_name}&#x27; after step {cut:,}, where the prediction ends, are not "
            "scored (a prediction of a shorter plan?)")
    page = (tmp_path / "r.html").read_text()
    assert "score so far" in page and f'<p class="warning">{said}</p>' in page
    res = runner.invoke(app, ["score", "--prediction", str(tmp_path / "p"), "--store", str(predicted / "store")])
    assert said.replace("&#x27;", "'") in " ".join(res.stderr.split())  # the same words as `ladder score`


def test_figures_of_a_run_drawn_against_another_s_prediction_say_whose_it_is_and_errors_are_scaled_from_ten_percent():
    """`ladder plot --target-run`: the hero-curve and residual titles name the run drawn and the run predicted (the
    curve is the prediction's, not the drawn run's); the errors' y-range leaves out the wide early band, as the
    hero curve does; a ladder without a drop fraction draws no empty panel for it."""
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    from ladder.output.plots import Curve, diagnostics, hero_curve, residuals
    from ladder.predict.prediction import Prediction

    steps = np.arange(20, 1_001, 20)
    med = np.full(steps.size, 2.0)
    rel = np.where(steps < 100, 0.10, 0.01)  # a 10% band at 2–8% of the run, 1% from 10% on
    table = pd.DataFrame({"step": steps, "tokens": steps, "fraction": steps / 1_000, "compute": steps * 1e9,
                          "median": med, "lo50": med * (1 - rel / 3), "hi50": med * (1 + rel / 3),
                          "lo90": med * (1 - rel), "hi90": med * (1 + rel), "in_assumptions": True})
    pred = Prediction("small-run", "eval/loss", table, planned_steps=1_000)
    actual = Curve("small-run", steps[:25] / 1_000, med[:25] / 1.002)
    fig = hero_curve(pred, actual, predicted_as="hero")
    assert fig.axes[0].get_title() == "small-run: against the prediction of hero"
    plt.close(fig)
    fig = residuals(pred, actual, predicted_as="hero")
    ax = fig.axes[0]
    assert " ".join(ax.get_title().split()).startswith("small-run: against the prediction of hero: errors of the prediction")
    lo, hi = ax.get_ylim()
    assert -1.3 < lo < 100 * (1 / 1.01 - 1) and 100 * (1 / 0.99 - 1) < hi < 1.3  # the 1% band, not the 10%
    plt.close(fig)
    fig = residuals(pred, actual)
    assert " ".join(fig.axes[0].get_title().split()).startswith("small-run: errors of the prediction")
    plt.close(fig)
    young = Curve("small-run", steps[:4] / 1_000, med[:4] / 1.05)  # 8% in, 5% off: its points stay in view
    lo, hi = residuals(pred, young).axes[0].get_ylim()
    assert lo < 0 and hi > 5.0
    plt.close("all")
    f = np.linspace(0.05, 1.0, 20)
    grad = [Curve(f"r{i}", f, 1.0 + 0.1 * i + f) for i in range(3)]
    fig = diagnostics(grad, [Curve(c.label, np.zeros(0), np.zeros(0)) for c in grad])
    assert [ax.get_ylabel() for ax in fig.axes] == ["grad norm (global L2)"]
    plt.close(fig)
    # the ladder fit names the rungs it cannot draw (no final: crashed, still training), which the prediction used
    from ladder.output.plots import ladder_fit

    rungs = [Curve(f"r{i}", f, 3.0 - 0.2 * i + 0 * f, compute=10.0 ** (18 + i)) for i in range(3)]
    fig = ladder_fit(rungs, lambda c: 2 + (c / 1e15) ** -0.1, pred, hero_compute=1e22, predicted_as="hero")
    assert fig.axes[0].get_title() == "Ladder fit and the prediction of hero"  # its point is hero's prediction
    plt.close(fig)
    fig = ladder_fit(rungs, lambda c: 2 + (c / 1e15) ** -0.1, pred, hero_compute=1e22, not_drawn="big-rung")
    assert [t.get_text() for t in fig.texts] == ["not drawn, with no final of their plans (the prediction uses their "
                                                 "evals): big-rung"]
    plt.close(fig)
    assert ladder_fit(rungs, lambda c: 2 + (c / 1e15) ** -0.1, pred, hero_compute=1e22).texts == []


def test_a_report_made_before_its_run_is_pulled_says_the_store_holds_no_such_run(predicted, tmp_path):
    """A hero not in the store yet (predicted before it started, or a typo of its name) is not called a run that
    has logged no evals: the page says the store holds no run of that name, and to pull it."""
    hero = micro_plan().hero.name
    for folder in sorted((predicted / "runs").iterdir()):
        if folder.name != hero:
            assert runner.invoke(app, ["pull", "local", str(folder), "--store", str(tmp_path / "rungs")]).exit_code == 0
    res = runner.invoke(app, ["report", "--prediction", str(predicted / "pred"), "--store", str(tmp_path / "rungs"),
                              "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text()
    assert f"The store holds no run named {hero} (not pulled yet, or a typo?" in page
    assert "has logged no" not in page


def test_a_step_the_laws_give_no_value_at_is_not_said_to_lie_outside_the_assumptions():
    """The 5% row before the rungs' first shared eval read "in assumptions: no", which says the step lies past a
    change no law models."""

    from ladder.output.report import prediction_rows

    steps = np.arange(500, 10_001, 500)
    med = np.where(steps >= 1_500, 3.0 - 1e-4 * steps, np.nan)
    pred = straight(steps, med=med, in_assumptions=np.isfinite(med) & (steps < 9_000))
    rows = prediction_rows(pred)
    assert list(rows["in assumptions"]) == ["–", "–"] + ["yes"] * 15 + ["no"] * 3
    assert list(rows["predicted"][:2]) == ["–", "–"]


def test_a_score_of_evals_in_any_order_is_the_score_of_them_by_step():
    """Scored by position: a run's chunks joined out of order gave the 'last eval' of the last row (step 2,200 at
    -0.94%), not of the largest step."""
    import pandas as pd

    from ladder.predict.scoring import score_prediction

    steps = np.arange(1_000, 10_001, 1_000)
    pred = straight(steps)
    med = pred.table["median"].to_numpy()
    actual = pd.Series(med * (1 + 0.001 * np.arange(10)), index=steps)
    in_order = score_prediction(pred, actual)
    shuffled = score_prediction(pred, actual.iloc[[3, 9, 0, 7, 1, 8, 2, 6, 4, 5]])
    assert shuffled == in_order and in_order.last_step == 10_000
    assert in_order.last_error == pytest.approx(1 / 1.009 - 1)


def test_a_report_row_that_two_marks_share_keeps_the_runs_eval():
    """Evals every 10%: the 5% mark finds no eval within 1% and falls on the 10% row's step, which it used to keep
    (actual "–") in place of the 10% mark's row, which holds the eval logged there."""
    import pandas as pd

    from ladder.output.report import prediction_rows

    steps = np.arange(1_000, 10_001, 1_000)
    pred = straight(steps)
    actual = pd.Series(pred.table["median"].to_numpy() * 1.02, index=steps)
    rows = prediction_rows(pred, actual)
    assert list(rows["step"]) == steps.tolist()  # one row a step, in order
    assert "–" not in set(rows["actual"]) and set(rows["error"]) == {f"{1 / 1.02 - 1:+.2%}"}


def test_a_per_step_metric_is_scored_as_the_watch_judges_it_not_value_by_value():
    """`ladder score --metric train/loss` scored each of 463 noisy steps against the curve (worst 50%, 73% inside the
    90% band) where the watch judges the mean of each step of the prediction."""
    import pandas as pd

    from ladder.predict.scoring import score_prediction

    steps = np.arange(100, 10_001, 100)
    pred = straight(steps, metric="train/loss", widths=(0.005, 0.015))
    med = pred.table["median"].to_numpy()
    every = np.arange(1, 10_001)
    noisy = (3.0 - 1e-4 * every) * (1 + 0.05 * np.random.default_rng(0).standard_normal(every.size))
    score = score_prediction(pred, pd.Series(noisy, index=every))
    assert score.n == 91 and score.read_from == 10_000 - 900  # the points from 10% of the plan on, each a mean
    assert score.curve_worst_error < 0.02 and score.inside_90 >= 0.95  # 5% noise a step, 0.5% a mean of 100
    assert score.rows()[0] == ("points scored", "91: means of 9,100 logged values, one a step of the prediction, as "
                                                "the watch judges them")
    sparse = score_prediction(pred, pd.Series(med, index=steps))  # evals as logged: each one scored
    assert sparse.n == 91 and sparse.read_from == 0 and sparse.rows()[0] == ("evals scored", "91")


def test_the_report_table_reads_a_per_step_metric_as_score_and_the_watch_do(tmp_path):
    """The report's 5% table took a per-step train loss's one noisy value at each mark (errors of up to 10% and rows
    "neither band" on a run `ladder score` finds inside its 90% band), where score and the watch take the mean since the
    prediction's step before."""
    import pandas as pd

    from ladder.output.report import INSIDE_50, INSIDE_90, prediction_rows, write_report
    from ladder.predict.scoring import score_prediction

    steps = np.arange(100, 10_001, 100)
    pred = straight(steps, metric="train/loss", widths=(0.005, 0.015))
    every = np.arange(1, 10_001)
    noisy = pd.Series((3.0 - 1e-4 * every) * (1 + 0.05 * np.random.default_rng(0).standard_normal(every.size)),
                      index=every)
    rows = prediction_rows(pred, noisy)
    errors = np.array([float(e.rstrip("%")) for e in rows["error"]]) / 100
    assert len(rows) == 20 and list(rows["step"]) == list(range(500, 10_001, 500))
    assert np.max(np.abs(errors)) < 0.02 and set(rows["actual in"]) <= {INSIDE_50, INSIDE_90}
    mean = noisy.loc[9_901:10_000].mean()  # the last row: the mean of the steps since the prediction's step before
    assert rows["actual"].iloc[-1] == f"{mean:.4f}" != f"{noisy.loc[10_000]:.4f}"
    line = 3.0 - 1e-4 * np.arange(9_901, 10_001)
    assert float(rows["predicted"].iloc[-1]) == pytest.approx(line.mean(), abs=1e-4)  # beside the prediction's mean there
    assert score_prediction(pred, noisy).inside_90 >= 0.95
    page = write_report(tmp_path / "report.html", pred, [], noisy).read_text()
    assert "train/loss is logged far more often than the prediction" in page
    sparse = prediction_rows(pred, pd.Series(pred.table["median"].to_numpy() * 1.01, index=steps))  # evals: as logged
    assert set(sparse["error"]) == {f"{1 / 1.01 - 1:+.2%}"} and sparse["predicted"].iloc[-1] == "2.0000"


def test_a_score_of_a_run_that_finished_its_edited_plan_says_so():
    """"last eval (step 736, 80%)" for a run that made its cut and finished: 80% of the plan it started with is all
    of the plan it ended under."""
    import pandas as pd

    from ladder.predict.scoring import score_prediction

    steps = np.arange(500, 8_001, 500)
    pred = straight(steps, fraction_edited=np.where(steps <= 5_000, steps / 10_000, steps / 8_000))
    score = score_prediction(pred, pd.Series(pred.table["median"].to_numpy(), index=steps))
    assert "last eval (step 8,000, 80% of the plan, 100% of the edited plan)" in dict(score.rows())


def straight(steps: np.ndarray, metric: str = "eval/loss", widths=(0.01, 0.03), med=None, **columns):
    """A prediction of a 10,000-step plan along a straight line (3 − 1e-4 · step unless `med`), its 50% and 90%
    bands ± `widths` (relative); `columns` add to or replace its table's."""
    import pandas as pd

    from ladder.predict.prediction import Prediction

    med = 3.0 - 1e-4 * steps if med is None else med
    w50, w90 = widths
    table = pd.DataFrame({"step": steps, "tokens": steps * 1000, "fraction": steps / 10_000, "compute": steps * 1e9,
                          "median": med, "lo50": med * (1 - w50), "hi50": med * (1 + w50), "lo90": med * (1 - w90),
                          "hi90": med * (1 + w90), "in_assumptions": True, **columns})
    return Prediction("hero", metric, table, planned_steps=10_000)
