"""`ladder fit endpoint|surface|curve` and `ladder backtest` from a CSV, the store glue, and the
one-line errors (exit code 2) for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from fits import Momentum, fit_momentum
from fits.candidates import Z90
from fits.predictor import UNTESTED_ERROR
from fits.surfacechoice import distance
from fits.synthetic import endpoint_losses, known_law, per_fraction_losses, surface_losses
from ladder import Schedule
from ladder.cli import app
from ladder.data import fitdata
from ladder.data.store import Store
from ladder.errors import LadderError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import fit_datasets as ds  # noqa: E402

runner = CliRunner()
COMPUTE = np.geomspace(1e18, 1e21, 8)


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(res, *fragments: str) -> None:
    assert res.exit_code == 2, res.output
    text = res.output.strip()
    assert text.startswith("error:") and "Traceback" not in text
    for f in fragments:
        assert f in text, text


@pytest.fixture
def endpoint_csv(tmp_path) -> Path:
    """Two checkpoints per run; the last one is the final loss."""
    y = endpoint_losses(np.random.default_rng(0), COMPUTE, 1.7, 2e3, 0.2, noise=0.003)
    rows = []
    for i, (c, loss) in enumerate(zip(COMPUTE, y)):
        rows.append({"run_id": f"r{i}", "step": 50, "compute": c / 2, "loss": loss + 0.3})
        rows.append({"run_id": f"r{i}", "step": 100, "compute": c, "loss": loss})
    path = tmp_path / "finals.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_fit_endpoint_json_from_a_csv(endpoint_csv):
    res = run("fit", "endpoint", "--csv", endpoint_csv, "--format", "json", "--at", "1e22,1e23")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["form"] == "endpoint" and out["n_runs"] == 8
    assert set(out["params"]) == {"E", "A", "alpha"}
    assert out["params"]["alpha"] == pytest.approx(0.2, abs=0.05)
    assert out["objective"] > 0 and out["bootstrap"] is None
    assert [p["compute"] for p in out["predictions"]] == [1e22, 1e23]
    for p in out["predictions"]:
        assert p["lo90"] < p["lo50"] < p["median"] < p["hi50"] < p["hi90"] and "student-t" in p["band"]
        # at least 1% (one sd) per e-fold of extrapolation: half the e-folds in compute beyond the largest run
        assert p["efolds_out"] == pytest.approx(0.5 * np.log(p["compute"] / COMPUTE.max()))
        reach = Z90 * UNTESTED_ERROR * p["efolds_out"] * p["median"]
        assert p["hi90"] - p["median"] >= reach * (1 - 1e-9) and p["median"] - p["lo90"] >= reach * (1 - 1e-9)
    inside = json.loads(run("fit", "endpoint", "--csv", endpoint_csv, "--format", "json", "--at",
                            str(COMPUTE.max())).stdout)["predictions"][0]
    assert inside["efolds_out"] == 0.0
    table = " ".join(run("fit", "endpoint", "--csv", endpoint_csv, "--at", "1e22").stdout.split())
    assert f"at C = 1e+22 FLOPs ({1e22 / COMPUTE.max():.3g}× the largest run's): L = " in table
    far = 0.5 * np.log(1e22 / COMPUTE.max())  # beside the ratio in compute, the e-folds said in what they count
    assert f"{far:.2f} e-folds out, in model size: half those in compute)" in table, table

    # --at given several times predicts at every compute each gives (it kept the last one's, unsaid)
    again = json.loads(run("fit", "endpoint", "--csv", endpoint_csv, "--format", "json", "--at", "1e23", "--at",
                           "1e22,5e22").stdout)["predictions"]
    assert [p["compute"] for p in again] == [1e23, 1e22, 5e22]
    curve = run("fit", "curve", "--csv", endpoint_csv, "--run-col", "run_id", "--at", "1e22", "--at", "1e23")
    one_error_line(curve, "--at given 2 times (1e+22, 1e+23): a fit predicts one run's curve; give one --at")


def test_fit_endpoint_bootstrap_intervals(endpoint_csv):
    res = run("fit", "endpoint", "--csv", endpoint_csv, "--format", "json", "--bootstrap", "40", "--at", "1e22")
    out = json.loads(res.stdout)
    boot = out["bootstrap"]
    assert boot["n"] == 40 and boot["level"] == 0.9
    for k, (lo, hi) in boot["intervals"].items():
        assert lo <= out["params"][k] <= hi, k
    assert "bootstrap" in out["predictions"][0]["band"] and "e-fold" in out["predictions"][0]["band"]
    alone = json.loads(run("fit", "endpoint", "--csv", endpoint_csv, "--format", "json", "--at", "1e22").stdout)
    p, q = out["predictions"][0], alone["predictions"][0]  # the wider of the two bands at each edge
    assert p["lo90"] <= q["lo90"] and p["hi90"] >= q["hi90"] and p["lo50"] <= q["lo50"] and p["hi50"] >= q["hi50"]
    # the median is the fit's own, the value its printed parameters give: the refits' median moved it (by 0.7% on
    # OLMo's 13B), with the parameters unchanged
    E, A, alpha = (out["params"][k] for k in ("E", "A", "alpha"))
    assert p["median"] == q["median"] == pytest.approx(E + A * 1e22**-alpha, rel=1e-9)
    for seed in ("1", "2"):
        again = json.loads(run("fit", "endpoint", "--csv", endpoint_csv, "--format", "json", "--bootstrap", "20",
                               "--seed", seed, "--at", "1e22").stdout)["predictions"][0]
        assert again["median"] == q["median"] and again["lo90"] <= again["median"] <= again["hi90"]


def test_fit_endpoint_on_an_isoflop_sweep_fits_each_budgets_least_loss(tmp_path):
    """Several model sizes per compute budget: the law fits each budget's least loss (approach 2), the
    output lists the budgets, and the prediction is the least loss a larger budget reaches."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_fits_isoflop import sweep, true_minimum

    C, N, D, y = sweep(budgets_=(1e18, 3e18, 1e19, 3e19, 1e20), noise=0.002, seed=3)
    table = pd.DataFrame({"params": N, "tokens": D, "budget": C, "loss": y})
    path = tmp_path / "sweep.csv"
    table.to_csv(path, index=False)
    res = run("fit", "endpoint", "--csv", path, "--compute-col", "budget", "--at", "1e21", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_runs"] == 45 and out["n_budgets"] == 5 and [b["runs"] for b in out["budgets"]] == [9] * 5
    text = run("fit", "endpoint", "--csv", path, "--compute-col", "budget", "--bootstrap", "20").stdout
    assert text.startswith("endpoint law L(C) = E + A·C^-α: 5 budgets' least losses (of 45 runs), compute")
    assert "bootstrap over budgets' least losses (of 45 runs): 20 refits" in text
    assert {b["how"] for b in out["budgets"]} == {"vertex"} and any("isoFLOP sweep" in n for n in out["notes"])
    truth = true_minimum(1e21)[0]
    assert out["predictions"][0]["median"] == pytest.approx(truth, rel=0.005)
    assert out["predictions"][0]["lo90"] <= truth <= out["predictions"][0]["hi90"]
    assert out["predictions"][0]["params_at_optimum"] == pytest.approx(true_minimum(1e21)[1], rel=0.1)
    assert out["optimal_size"]["budgets"] == 5 and out["optimal_size"]["exponent"] == pytest.approx(0.513, abs=0.02)
    shown = run("fit", "endpoint", "--csv", path, "--compute-col", "budget")
    assert "budget 1e+20 FLOPs: 9 runs, least loss" in shown.stdout and "vertex" in shown.stdout
    assert "N at the least loss ∝ C^0.5" in shown.stdout
    # the backtest holds out the largest budget's least loss, predicted from the smaller budgets' minima
    bt = json.loads(run("backtest", "--csv", path, "--compute-col", "budget", "--format", "json").stdout)
    [row] = bt["rows"]
    largest = out["budgets"][-1]
    assert row["target"] == "budget 1e+20" and row["actual"] == pytest.approx(largest["loss"])
    assert any("isoFLOP sweep" in n for n in bt["notes"])
    assert not any("fewer than 3 model sizes" in n for n in out["notes"])
    # a budget read off a figure, its computes 5% apart, splits into budgets of one or two sizes: said
    top = table["budget"] > 5e19  # the largest budget
    jitter = table.assign(budget=table["budget"].where(~top, table["budget"] * (1 + 0.05 * (top.cumsum() % 5))))
    jitter.to_csv(tmp_path / "jitter.csv", index=False)
    noted = json.loads(run("fit", "endpoint", "--csv", tmp_path / "jitter.csv", "--compute-col", "budget",
                           "--format", "json").stdout)
    assert any(n.startswith("5 of 9 budgets hold fewer than 3 model sizes") for n in noted["notes"]), noted["notes"]
    # two budgets give the law two points: a clear error, not the law's count of runs
    two = tmp_path / "two.csv"
    table[table["budget"] < 5e18].to_csv(two, index=False)
    one_error_line(run("fit", "endpoint", "--csv", two, "--compute-col", "budget"), "isoFLOP sweep at 2 budgets",
                   "3 budgets or more")
    # without the sizes the runs cannot be told from repeats: every run is fitted, and the output says why
    table.drop(columns="params").to_csv(path, index=False)
    bare = json.loads(run("fit", "endpoint", "--csv", path, "--compute-col", "budget", "--format", "json").stdout)
    assert bare["n_runs"] == 45 and "budgets" not in bare
    assert any("45 runs share a compute budget" in n and "'params'" in n for n in bare["notes"])


def test_fit_endpoint_counts_the_budgets_of_a_long_sweep_in_one_line(shared_data):
    """The Chinchilla table, read off figures, splits into 158 budgets: the terminal gets one line counting how
    each budget's least loss was had, not 158; the JSON gives every budget."""
    path = shared_data / "chinchilla_epoch" / "chinchilla_epoch_tidy.csv"
    out = json.loads(run("fit", "endpoint", "--csv", path, "--compute-col", "flops", "--format", "json").stdout)
    budgets = out["budgets"]
    assert len(budgets) > 20
    text = " ".join(run("fit", "endpoint", "--csv", path, "--compute-col", "flops").stdout.split())
    assert "budget " + f"{budgets[0]['compute']:.3g} FLOPs:" not in text
    count = {h: sum(b["how"] == h for b in budgets) for h in ("run", "edge", "vertex")}
    assert (f"{len(budgets)} budgets, {budgets[0]['compute']:.3g} .. {budgets[-1]['compute']:.3g} FLOPs; the least loss is "
            f"the lowest run at {count['run']}; the lowest run, at the edge of the sizes (an upper bound) at {count['edge']}; "
            f"a parabola's vertex at {count['vertex']} (--format json gives each budget)") in text


def test_fit_endpoint_groups_a_sweep_by_the_budgets_its_tokens_trace(tmp_path):
    """A sweep whose computes (6·N·D of an N that counts embeddings) scatter around its budgets: its tokens say
    which runs share one, and each budget's least loss stands at its runs' median compute."""
    from fits.synthetic import EPOCH_CHINCHILLA, surface_losses
    from tests.test_fits_isoflop_traced import REPEATING, embedded_sweep

    N, D, which = embedded_sweep(REPEATING[2:])
    y = surface_losses(np.random.default_rng(5), N, D, **EPOCH_CHINCHILLA, noise=0.002)
    path = tmp_path / "sweep.csv"
    pd.DataFrame({"params": N, "tokens": D, "compute": 6 * N * D, "loss": y}).to_csv(path, index=False)
    out = json.loads(run("fit", "endpoint", "--csv", path, "--format", "json").stdout)
    assert [b["runs"] for b in out["budgets"]] == list(np.bincount(which))
    np.testing.assert_allclose([b["compute"] for b in out["budgets"]],
                               [np.median((6 * N * D)[which == i]) for i in range(which.max() + 1)])
    assert any("tokens trace 6 of them" in n for n in out["notes"]), out["notes"]
    # `ladder backtest` holds out the largest of those budgets' least losses, as the fit groups them
    bt = json.loads(run("backtest", "--csv", path, "--format", "json").stdout)
    assert [r["target"] for r in bt["rows"]] == [f"budget {out['budgets'][-1]['compute']:.3g}"]
    assert any("tokens trace 6 of them" in n for n in bt["notes"])
    # without the tokens the computes alone cannot group them: the law is fitted to every run, as before
    pd.DataFrame({"params": N, "compute": 6 * N * D, "loss": y}).to_csv(path, index=False)
    plain = json.loads(run("fit", "endpoint", "--csv", path, "--format", "json").stdout)
    assert not any("tokens trace" in n for n in plain["notes"])


def test_fit_endpoint_table(endpoint_csv):
    res = run("fit", "endpoint", "--csv", endpoint_csv, "--at", "1e22", "--E", "1.7")
    assert res.exit_code == 0, res.output
    assert "E = 1.7000 (pinned)" in res.stdout and "at C = 1e+22" in res.stdout


def test_fit_surface_lands_on_epoch_from_the_csv(shared_data):
    csv = shared_data / "chinchilla_epoch" / "chinchilla_epoch_tidy.csv"
    flags = ("--run-col", "", "--step-col", "", "--drop-col", "excluded_in_epoch_fit", "--format", "json",
             "--at", "7e10,1.4e12")
    res = run("fit", "surface", "--csv", csv, "--form", "free", *flags)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_runs"] == 240 and set(out["params"]) == {"E", "A", "B", "alpha", "beta"}
    assert out["params"]["E"] == pytest.approx(1.817, abs=0.01)
    assert out["params"]["alpha"] == pytest.approx(0.348, abs=0.005)
    assert out["params"]["beta"] == pytest.approx(0.366, abs=0.005)
    p = out["predictions"][0]
    assert p["lo90"] < p["lo50"] < p["median"] < p["hi50"] < p["hi90"]
    runs = pd.read_csv(csv)
    runs = runs[~runs["excluded_in_epoch_fit"].astype(bool)]
    far = distance(7e10, 1.4e12, runs["params"], runs["tokens"])
    assert out["predictions"][0]["efolds_out"] == pytest.approx(float(far)) and far > np.log(7e10 / runs["params"].max())
    assert out["form_choice"]["why"].startswith("named")
    # By default the form is the one that predicts the largest sizes better from the smaller ones: here one
    # exponent (the free form misses the largest size by -1.40%, the shared one by -1.07%).
    auto = json.loads(run("fit", "surface", "--csv", csv, *flags).stdout)
    choice = auto["form_choice"]
    assert choice["form"] == "shared" and auto["shared_exponent"] is True
    assert auto["params"]["alpha"] == auto["params"]["beta"] == pytest.approx(0.357, abs=0.005)
    by = {(r["form"], i // 2 + 1): r["mean_abs_error"] for i, r in enumerate(choice["backtest"])}  # cut 1, cut 2
    assert by[("free", 1)] == pytest.approx(0.0140, abs=0.001) and by[("shared", 1)] == pytest.approx(0.0107, abs=0.001)
    assert by[("shared", 1)] + by[("shared", 2)] < by[("free", 1)] + by[("free", 2)]


@pytest.fixture
def curves_csv(tmp_path) -> Path:
    G = np.arange(1, 11) / 10
    C = np.geomspace(1e19, 1e21, 5)
    Y = per_fraction_losses(np.random.default_rng(1), C, G, 2.0, np.full(10, 900.0), np.full(10, 0.18), noise=0.002)
    rows = [{"run_id": f"r{i}", "step": int(g * 1000), "total_steps": 1000, "compute": c * g, "loss": y}
            for i, c in enumerate(C) for g, y in zip(G, Y[i])]
    path = tmp_path / "curves.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_fit_curve_counts_each_fraction_on_the_runs_that_reach_it(curves_csv, tmp_path):
    """A run that stops short gave every fraction the degrees of freedom and the distance of all the runs: the last
    fractions' band came out finite on runs that leave it none, and narrower than without the short run."""
    rows = pd.read_csv(curves_csv)
    short = rows[~((rows["run_id"] == "r4") & (rows["step"] > 500))]  # the largest run stops at 50%
    path = tmp_path / "short.csv"
    short[short["run_id"] != "r0"].to_csv(path, index=False)  # four runs: r1–r3 reach the end, r4 half of it
    out = json.loads(run("fit", "curve", "--csv", path, "--every", "0.1", "--E", "2", "--at", "1e22",
                         "--format", "json").stdout)["prediction"]
    assert out["dof_by_fraction"] == [2] * 5 + [1] * 5  # four runs, three past 50%; A and α at each, E pinned
    far = 0.5 * np.log(1e22 / np.array([1e21] * 5 + [1e21 / 10 ** 0.5] * 5))  # from the largest run that reaches it
    assert out["efolds_out_by_fraction"] == pytest.approx(far.tolist()) and out["efolds_out"] == pytest.approx(far[-1])
    without = tmp_path / "without.csv"
    short[~short["run_id"].isin(["r0", "r4"])].to_csv(without, index=False)
    alone = json.loads(run("fit", "curve", "--csv", without, "--every", "0.1", "--E", "2", "--at", "1e22",
                           "--format", "json").stdout)["prediction"]
    assert alone["dof_by_fraction"] == [1] * 10 and alone["efolds_out_by_fraction"][-1] == pytest.approx(far[-1])
    table = run("fit", "curve", "--csv", path, "--every", "0.1", "--E", "2", "--at", "1e22")
    said = " ".join(table.stdout.split())
    assert table.exit_code == 0 and "student-t, 2 dof to g = 0.5, 1 from 0.6 (fewer runs reach the later " \
        "fractions)" in said and "1.15 e-folds out to g = 0.5, 1.73 from 0.6" in said, table.stdout
    two = tmp_path / "two.csv"  # two runs reach the end: no spare run there, no band
    short[short["run_id"].isin(["r2", "r3", "r4"])].to_csv(two, index=False)
    table = run("fit", "curve", "--csv", two, "--every", "0.1", "--E", "2", "--at", "1e22")
    assert "g = 1.000: " in table.stdout and table.stdout.split("g = 1.000: ")[1].split("\n")[0].endswith(
        "50% unbounded  90% unbounded"), table.stdout


def test_fit_curve_says_rows_that_repeat_a_checkpoint(curves_csv, tmp_path):
    """Rows repeating a checkpoint with the same loss were merged without a word (a file joined twice, say)."""
    rows = pd.read_csv(curves_csv)
    path = tmp_path / "twice.csv"
    pd.concat([rows, rows.iloc[:3]]).to_csv(path, index=False)
    res = run("fit", "curve", "--csv", path, "--every", "0.1")
    assert res.exit_code == 0 and f"3 rows repeat a run's step with the same loss (first at line {len(rows) + 2}, run " \
        "'r0'): read once" in " ".join(res.output.split()), res.output
    assert "repeat" not in run("fit", "curve", "--csv", curves_csv, "--every", "0.1").output


def test_fit_curve_predicts_a_whole_curve_with_bands(curves_csv):
    res = run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.1",
              "--at", "1e22", "--bootstrap", "30", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["form"] == "per-fraction" and len(out["fractions"]) == 10
    pred = out["prediction"]
    assert pred["compute"] == 1e22 and len(pred["median"]) == 10
    assert all(a <= b <= c for a, b, c in zip(pred["lo90"], pred["median"], pred["hi90"]))
    table = run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.1", "--at", "1e22")
    assert table.exit_code == 0 and "g = 1.000" in table.stdout
    alone = json.loads(run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.1",
                           "--at", "1e22", "--format", "json").stdout)["prediction"]  # the Student-t band alone
    meta = ("compute", "efolds_out", "band", "efolds_out_by_fraction", "dof_by_fraction")
    assert {k for k in alone if k not in meta} == {k for k in pred if k not in meta} == {
        "fraction", "median", "lo50", "hi50", "lo90", "hi90"}
    assert all(a <= b for a, b in zip(pred["lo90"], alone["lo90"])) and all(
        a >= b for a, b in zip(pred["hi90"], alone["hi90"]))  # with --bootstrap: the wider of the two
    # 10× the largest run: at least 1% (one sd) per e-fold, half of log 10 e-folds, on the bootstrap's band
    far = 0.5 * np.log(10.0)
    assert pred["efolds_out"] == pytest.approx(far)
    assert pred["hi90"][-1] - pred["median"][-1] >= 1.6448 * 0.01 * far * pred["median"][-1]
    same = run("fit", "curve", "--csv", curves_csv, "--every", "0.1", "--at", "1e22", "--format", "json")
    assert json.loads(same.stdout)["prediction"] == alone  # its total_steps column read by default, as --help says
    no_plan = curves_csv.with_name("no-plan.csv")
    pd.read_csv(curves_csv).drop(columns="total_steps").to_csv(no_plan, index=False)
    one_error_line(run("fit", "curve", "--csv", no_plan), "name the total steps column (--total-steps-col NAME",
                   "--fraction-col NAME")
    one_error_line(run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.3"),
                   "--every 0.3", "1/n")
    # 1/n as the error suggests it (to 4 digits) is 1/n: the fit at n fractions, as with 1/n in full
    suggested = run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.3333",
                    "--format", "json")
    exact = run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", str(1 / 3),
                "--format", "json")
    assert suggested.exit_code == 0, suggested.output
    assert json.loads(suggested.stdout)["fractions"] == json.loads(exact.stdout)["fractions"]
    for bad in ("1e-06", "0", "0.6"):  # a fit at a million fractions would run out of memory
        one_error_line(run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", bad),
                       f"--every {bad}", "must be in [0.005, 0.5]")
    for bad in ("0", "-1e21", "inf", "nan"):
        one_error_line(run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--at", bad),
                       "--at", "not a positive number")


def test_fit_curve_warns_of_a_target_below_or_far_beyond_its_runs_as_the_endpoint_and_surface_laws_do(curves_csv):
    """Said under the JSON's warnings, as `fit surface` says its targets' (a script that reads the warnings missed
    them under the notes)."""
    def notes(at):
        res = run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.1", "--at", at,
                  "--format", "json")
        assert res.exit_code == 0, res.output
        assert not [n for n in json.loads(res.stdout)["notes"] if "the target at" in n]
        return [n for n in json.loads(res.stdout)["warnings"] if "the target at" in n]
    assert notes("1e22") == []
    [low] = notes("1e10")  # a compute in GFLOPs, say
    assert low.startswith("the target at C = 1e+10 lies below the fitted runs (the smallest 1e+19)")
    [far] = notes("1e29")  # 1e8× the largest run: 9.2 e-folds in size
    assert far.startswith("the target at C = 1e+29 lies 9.2 e-folds in size beyond the fitted runs (1e+04× their size, "
                          "1e+08× their compute)")


def test_fit_curve_notes_a_predicted_curve_that_rises(curves_csv, tmp_path):
    def rises(path):
        res = run("fit", "curve", "--csv", path, "--total-steps-col", "total_steps", "--every", "0.1", "--at", "1e22",
                  "--format", "json")
        assert res.exit_code == 0, res.output
        return [n for n in json.loads(res.stdout)["notes"] if "predicted median rises" in n]
    table = pd.read_csv(curves_csv)
    table["loss"] = 2.0 + 900.0 * table["compute"] ** -0.18  # the fixture's law without its noise
    table.to_csv(tmp_path / "clean.csv", index=False)
    assert rises(tmp_path / "clean.csv") == []
    table.loc[table["step"] == 600, "loss"] *= 1.03  # every run 3% up at 60%: noise the law at 60% follows
    table.to_csv(tmp_path / "bump.csv", index=False)
    [note] = rises(tmp_path / "bump.csv")
    assert note.startswith("the predicted median rises from g = 0.5 to 0.6 (") and "fitted at each fraction on its own" in note


def test_fit_curve_leaves_out_the_fractions_before_the_first_evals_and_says_so(curves_csv):
    """The runs evaluate every 10%; the default fractions (every 5%) begin at 5%, where no run has an eval."""
    out = json.loads(run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--format",
                         "json").stdout)
    assert out["fractions"] == pytest.approx(np.arange(2, 21) / 20) and len(out["A_by_fraction"]) == 19
    said = "fraction 0.05 left out: fewer than 2 runs have an eval that early"
    assert [n for n in out["notes"] if said in n]
    bt = run("backtest", "--form", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps")
    assert bt.exit_code == 0 and said in " ".join(bt.stdout.split()), bt.output
    odd = run("fit", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.04")
    assert odd.exit_code == 0 and "fractions 0.04, 0.08 left out" in odd.stdout and "(0.12 .. 1)" in odd.stdout


def test_fit_curve_names_the_runs_that_stop_short_of_the_end(curves_csv, tmp_path):
    """A run that crashed at 60% is fitted where it has evals, and the notes say which runs the end goes without."""
    args = ("fit", "curve", "--total-steps-col", "total_steps", "--every", "0.1", "--format", "json")
    assert not json.loads(run(*args, "--csv", curves_csv).stdout)["notes"]
    df = pd.read_csv(curves_csv)
    crashed = tmp_path / "crashed.csv"
    df[(df["run_id"] != "r2") | (df["step"] <= 600)].to_csv(crashed, index=False)
    out = json.loads(run(*args, "--csv", crashed).stdout)
    assert ["1 run stops short of fraction 1: r2 at 60%; the law at later fractions is fitted on 4 of 5 runs there"] \
        == out["notes"]
    # sampled at coarser fractions (0.5, 1), the run is still said to end where it did, not at the last one it has
    coarse = json.loads(run(*args[:-4], "--every", "0.5", "--format", "json", "--csv", crashed).stdout)
    assert any("r2 at 60%;" in n for n in coarse["notes"]), coarse["notes"]


def test_a_compute_column_of_each_runs_planned_compute_is_read_as_its_whole_compute(curves_csv, tmp_path):
    """A table of runs' planned computes (one value on every row of a run) fits as the compute spent by each row
    does, a crashed run included; a table that mixes the two is refused, naming a run of each."""
    df = pd.read_csv(curves_csv)
    df = df[(df["run_id"] != "r2") | (df["step"] <= 600)]  # crashed at 60%
    df.to_csv(tmp_path / "spent.csv", index=False)
    whole = df.groupby("run_id")["compute"].transform("max") / df.groupby("run_id")["step"].transform("max") * 1000
    df.assign(compute=whole).to_csv(tmp_path / "planned.csv", index=False)
    args = ("fit", "curve", "--total-steps-col", "total_steps", "--every", "0.1", "--at", "1e22", "--format", "json")
    spent, planned = (json.loads(run(*args, "--csv", tmp_path / f).stdout) for f in ("spent.csv", "planned.csv"))
    assert planned["params"] == pytest.approx(spent["params"], rel=1e-9)
    assert planned["prediction"]["median"] == pytest.approx(spent["prediction"]["median"], rel=1e-9)
    assert "column 'compute' holds one value per run: read as each run's whole (planned) compute" in planned["notes"]
    mixed = df.assign(compute=np.where(df["run_id"] == "r0", whole, df["compute"]))
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    one_error_line(run(*args, "--csv", tmp_path / "mixed.csv"),
                   "column 'compute' is the same at every row of run 'r0' but grows with the step in run 'r1'")


def test_a_last_eval_one_step_short_of_the_end_is_the_end(curves_csv, tmp_path):
    """Logs whose last eval is at step total − 1 (no later eval was due) still have a final loss."""
    df = pd.read_csv(curves_csv)
    df.loc[df["step"] == 1000, "step"] = 999
    short = tmp_path / "short.csv"
    df.to_csv(short, index=False)
    args = ("fit", "curve", "--total-steps-col", "total_steps", "--every", "0.1", "--format", "json")
    whole, one_short = (json.loads(run(*args, "--csv", p).stdout) for p in (curves_csv, short))
    assert one_short["params"]["E"] == pytest.approx(whole["params"]["E"], rel=1e-6)
    # evals planned at every 10% and rounded to whole steps land just after it (step 101 of 1,000): still at it
    df = pd.read_csv(curves_csv)
    df.loc[(df["step"] == 100) & (df["run_id"] != "r0"), "step"] = 101
    df.to_csv(short, index=False)
    late = run(*args, "--csv", short)
    assert late.exit_code == 0, late.output
    assert json.loads(late.stdout)["params"]["E"] == pytest.approx(whole["params"]["E"], rel=0.05)


def test_backtest_endpoint_json(endpoint_csv):
    res = run("backtest", "--form", "endpoint", "--csv", endpoint_csv, "--holdout", "1,2", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert len(out["rows"]) == 3  # the largest run with k=1; the two largest with k=2
    assert {r["held_out"] for r in out["rows"]} == {1, 2}
    assert all(r["extrapolation"] > 1 for r in out["rows"]) and 0 <= out["coverage"] <= 1
    assert all(abs(r["rel_error"]) < 0.02 for r in out["rows"])


def test_backtest_curve_table(curves_csv, endpoint_csv):
    res = run("backtest", "--form", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--every", "0.1")
    assert res.exit_code == 0, res.output
    assert "backtest of the per-fraction law" in res.stdout and "coverage" in res.stdout
    flat = " ".join(res.stdout.split())  # each column said, the curve's two with them
    assert "out: how many of the largest sizes were held out; extrap: the run's compute over" in flat
    assert "curve, worst: its mean and largest |error| over 10–100% of the run" in flat
    finals = " ".join(run("backtest", "--form", "endpoint", "--csv", endpoint_csv).stdout.split())
    assert "extrap: the run's compute" in finals and "curve, worst" not in finals  # no curve: not said


def test_bad_input_is_one_line_and_exit_2(endpoint_csv, tmp_path):
    one_error_line(run("fit", "endpoint", "--csv", endpoint_csv, "--compute-col", "flops"), "no column 'flops'", "--compute-col")
    one_error_line(run("fit", "endpoint", "--csv", tmp_path / "nope.csv"), "no such file")
    (tmp_path / "empty.csv").write_text("")
    one_error_line(run("fit", "endpoint", "--csv", tmp_path / "empty.csv"), "the file is empty",
                   "--csv takes a CSV of the runs")
    (tmp_path / "wide.csv").write_bytes("compute,loss\n1e18,3.0\n".encode("utf-16"))
    one_error_line(run("fit", "endpoint", "--csv", tmp_path / "wide.csv"), "UTF-16 text, not a CSV")
    one_error_line(run("fit", "endpoint", "--store", tmp_path / "empty"), "no store here")
    few = tmp_path / "few.csv"
    pd.DataFrame({"run_id": ["a", "b"], "compute": [1e18, 2e18], "loss": [3.0, 2.9]}).to_csv(few, index=False)
    one_error_line(run("fit", "endpoint", "--csv", few, "--step-col", ""), "at least 3 runs")
    neg = tmp_path / "neg.csv"
    pd.DataFrame({"run_id": list("abc"), "compute": [1e18, 2e18, 3e18], "loss": [3.0, -1.0, 2.8]}).to_csv(neg, index=False)
    one_error_line(run("fit", "endpoint", "--csv", neg, "--step-col", ""), "non-positive", "line 3")
    huge = tmp_path / "huge.csv"  # ten orders past any run: a typo, refused before it pulls the fit
    pd.DataFrame({"run_id": list("abc"), "compute": [1e18, 1e50, 3e18], "loss": [3.0, 2.9, 2.8]}).to_csv(huge, index=False)
    one_error_line(run("fit", "endpoint", "--csv", huge, "--step-col", ""), "column 'compute'", "above 1e+40", "line 3")
    three = tmp_path / "three.csv"  # as many runs as parameters: no resample can differ from the fit
    pd.DataFrame({"run_id": list("abc"), "compute": [1e18, 1e19, 1e20], "loss": [3.0, 2.8, 2.7]}).to_csv(three, index=False)
    one_error_line(run("fit", "endpoint", "--csv", three, "--step-col", "", "--bootstrap", "200"),
                   "3 runs for 3 parameters", "only a resample that holds every run can be refitted", "no finite band")
    one_error_line(run("fit", "surface", "--csv", few, "--step-col", "", "--at", "1e9"), "no column 'params'")
    one_error_line(run("fit", "endpoint", "--csv", endpoint_csv, "--E", "9"), "pinned E")
    one_error_line(run("fit", "endpoint", "--csv", endpoint_csv, "--level", "2"), "--level")
    one_error_line(run("backtest", "--csv", endpoint_csv, "--holdout", "8"), "cannot hold out 8")
    one_error_line(run("backtest", "--csv", endpoint_csv, "--holdout", "abc"), "--holdout 'abc'", "e.g. 1,2")
    once = json.loads(run("backtest", "--csv", endpoint_csv, "--holdout", "1,1", "--format", "json").stdout)
    assert len(once["rows"]) == 1  # k = 1 once
    both = json.loads(run("backtest", "--csv", endpoint_csv, "--holdout", "1", "--holdout", "2", "--format",
                          "json").stdout)
    assert {r["held_out"] for r in both["rows"]} == {1, 2}  # given twice: each (the last alone, unsaid, before)
    clash = tmp_path / "clash.csv"
    pd.DataFrame({"run_id": list("aabcd"), "step": [1] * 5, "compute": [1e18, 1e18, 1e19, 1e20, 1e21],
                  "loss": [3.0, 3.5, 2.8, 2.6, 2.5]}).to_csv(clash, index=False)
    one_error_line(run("fit", "endpoint", "--csv", clash), "lines 2 and 3", "two losses at step 1")


@pytest.mark.parametrize("args", [["fit"], ["fit", "endpoint"], ["fit", "surface"], ["fit", "curve"], ["backtest"]])
def test_every_command_explains_itself(args):
    res = run(*args, "--help")
    assert res.exit_code == 0
    assert "Usage" in res.output and len(res.output) > 300


# ---- the store glue, on a stand-in with the store's interface -----------------------------------
class FakeStore:
    root = Path("fake")

    def __init__(self, runs: pd.DataFrame, history: pd.DataFrame):
        self._runs, self._history = runs, history

    def exists(self):
        return True

    def must_exist(self, how):
        return self

    def runs(self):
        return self._runs

    def run_config(self, run_id):  # as the real store's for a run it did not plan
        return None

    def history(self, run_ids=None, metrics=None, include_nonfinite=False):
        h = self._history
        if run_ids is not None:
            h = h[h["run_id"].isin(run_ids)]
        return h[h["metric"].isin(metrics)] if metrics is not None else h

    fitted_history = Store.fitted_history


def fake_store(finished=True) -> FakeStore:
    runs, hist = [], []
    for i, c in enumerate(COMPUTE[:5]):
        tokens = 1000 * 2**i
        runs.append({"run_id": f"id{i}", "name": f"rung{i}", "group": "g", "role": "rung", "active_params": 1e6 * 2**i,
                     "total_params": 2e6 * 2**i, "fit_flops_per_token": c / tokens, "stop_after_steps": 100,
                     "tokens_per_step": tokens // 100, "planned_tokens": tokens,
                     "state": "finished" if finished or i < 4 else "running", "source": "test", "config_json": "{}"})
        for step in (50, 100):
            hist.append({"run_id": f"id{i}", "step": step, "tokens": tokens * step // 100, "fraction": step / 100,
                         "metric": "eval/loss", "value": 1.7 + 2e3 * (c * step / 100) ** -0.2})
    return FakeStore(pd.DataFrame(runs), pd.DataFrame(hist))


def test_a_store_of_several_groups_needs_group_to_fit():
    """Two ladders in one store: every law from the store refuses to pool them and says how to pick one;
    --group picks one, and '' picks the runs of no group."""
    store = fake_store()
    runs = store.runs().copy()
    runs.loc[3:, "group"] = "other"
    runs.loc[4, "group"] = None
    mixed = FakeStore(runs, store.history())
    for read in (lambda **k: fitdata.finals_from_store(mixed, "eval/loss", **k),
                 lambda **k: fitdata.curves_from_store(mixed, "eval/loss", np.array([1.0]), **k),
                 lambda **k: fitdata.lr_curves_from_store(mixed, "eval/loss", **k)):
        with pytest.raises(LadderError, match=r"holds runs of 3 groups \(\(no group\), 'g', 'other'\).*--group NAME \(--group '' for the runs of none\)"):
            read()
    assert fitdata.finals_from_store(mixed, "eval/loss", group="g").names == ["rung0", "rung1", "rung2"]
    assert fitdata.finals_from_store(mixed, "eval/loss", group="").names == ["rung4"]


def test_a_run_stored_twice_is_refused_by_every_law_from_the_store():
    """One run pulled from its folder and from its wandb files: two ids, the very same evals. A law would count it
    twice (its band far too narrow); every read from the store refuses, naming both and the command that fixes it."""
    store = fake_store()
    runs, hist = store.runs(), store.history()
    copy = FakeStore(pd.concat([runs, runs.iloc[[1]].assign(run_id="id1-wandb")], ignore_index=True),
                     pd.concat([hist, hist[hist["run_id"] == "id1"].assign(run_id="id1-wandb")], ignore_index=True))
    for read in (lambda: fitdata.finals_from_store(copy, "eval/loss"),
                 lambda: fitdata.curves_from_store(copy, "eval/loss", np.array([1.0])),
                 lambda: fitdata.lr_curves_from_store(copy, "eval/loss")):
        with pytest.raises(LadderError, match=r"runs 'id1' \(rung1\) and 'id1-wandb' \(rung1\) log the very same "
                                              r"eval/loss .* `ladder runs --remove id1-wandb --store fake`"):
            read()
    reseeded = FakeStore(copy.runs(), copy.history().assign(  # another seed of it is another run
        value=lambda h: h["value"] * np.where(h["run_id"] == "id1-wandb", 1.001, 1.0)))
    assert fitdata.finals_from_store(reseeded, "eval/loss").names.count("rung1") == 2
    larger = copy.runs().assign(active_params=lambda r: np.where(r["run_id"] == "id1-wandb", 3e6, r["active_params"]))
    same_loss = FakeStore(larger, copy.history())  # another size that ends on the same rounded losses: another run
    assert fitdata.finals_from_store(same_loss, "eval/loss").names.count("rung1") == 2


def test_store_finals_and_curves():
    store = fake_store()
    finals = fitdata.finals_from_store(store, "eval/loss", compute="fit")
    assert finals.names == [f"rung{i}" for i in range(5)]
    np.testing.assert_allclose(finals.compute, COMPUTE[:5])
    np.testing.assert_allclose(finals.loss, 1.7 + 2e3 * COMPUTE[:5] ** -0.2)
    curves = fitdata.curves_from_store(store, "eval/loss", np.array([0.5, 1.0]), compute="fit")
    np.testing.assert_allclose(curves.compute, COMPUTE[:5])
    # by default, every run giving N, compute is 6·N·D, as `ladder predict` counts it, and a note says so
    n, tokens = 1e6 * 2.0 ** np.arange(5), 1000 * 2.0 ** np.arange(5)
    auto = fitdata.finals_from_store(store, "eval/loss")
    np.testing.assert_allclose(auto.compute, 6 * n * tokens)
    assert auto.notes[0].startswith("compute is 6·N·D: every run gives N")
    np.testing.assert_allclose(fitdata.curves_from_store(store, "eval/loss", np.array([1.0])).compute, 6 * n * tokens)
    # a run without N: auto falls back to fit FLOPs; 6nd names the run
    runs = store.runs().copy()
    runs.loc[2, "active_params"] = np.nan
    partial = FakeStore(runs, store.history())
    np.testing.assert_allclose(fitdata.finals_from_store(partial, "eval/loss").compute, COMPUTE[:5])
    with pytest.raises(LadderError, match="no parameter count .* for rung2"):
        fitdata.finals_from_store(partial, "eval/loss", compute="6nd")
    with pytest.raises(LadderError, match="--compute 'flops'"):
        fitdata.finals_from_store(store, "eval/loss", compute="flops")
    np.testing.assert_allclose(curves.losses[:, 0], 1.7 + 2e3 * (COMPUTE[:5] / 2) ** -0.2)
    with pytest.raises(LadderError, match="no values of 'train/loss'"):
        fitdata.finals_from_store(store, "train/loss")
    with pytest.raises(LadderError, match="no runs match"):
        fitdata.finals_from_store(store, "eval/loss", group="other")
    with pytest.raises(LadderError, match=r"no runs match \(no group \(--group ''\), role 'rung'"):
        fitdata.finals_from_store(store, "eval/loss", group="")  # every run has a group: '' matched none
    unfinished = fitdata.finals_from_store(fake_store(finished=False), "eval/loss")
    assert len(unfinished.names) == 4 and not finals.left_out  # the run still running is left out, and named
    assert unfinished.left_out == "left out, not finished (the law fits final losses): rung4 (running)"
    assert unfinished.notes[-1] == unfinished.left_out


def test_a_rung_whose_plan_was_extended_is_read_along_the_plan_it_ran():
    """The stored fraction is of the plan the run started with (1.5 at the end of a rung extended from 100
    to 150 steps); the fits read each curve along the plan it ran, every edit applied, and its end as an end."""
    store = fake_store()
    runs, hist = store.runs().copy(), store.history()
    runs.loc[0, "stop_after_steps"] = 150
    extended = pd.DataFrame({"run_id": "id0", "step": [50, 100, 150], "tokens": [500, 1000, 1500],
                             "fraction": [0.5, 1.0, 1.5], "metric": "eval/loss", "value": [3.0, 2.5, 2.2]})
    edited = FakeStore(runs, pd.concat([hist[hist["run_id"] != "id0"], extended], ignore_index=True))
    curves = fitdata.curves_from_store(edited, "eval/loss", np.array([1 / 3, 2 / 3, 1.0]), compute="fit")
    np.testing.assert_allclose(curves.losses[0], [3.0, 2.5, 2.2])
    assert fitdata.finals_from_store(edited, "eval/loss", compute="fit").loss[0] == 2.2
    runs.loc[0, "stop_after_steps"] = 300  # stopped half way through a plan extended to 300: no final loss
    with pytest.raises(LadderError, match="rung0.* ends before its planned last step") as refused:
        fitdata.finals_from_store(FakeStore(runs, edited.history()), "eval/loss", compute="fit")
    assert "or where it stopped for good, say so (a table imported with a state column, or --coord-column " \
           "state=COLUMN, of crashed: the laws leave it out), or take it out with `ladder runs --remove id0" \
           in str(refused.value)


def test_a_finished_run_whose_last_loss_is_nan_is_named_for_its_value_not_as_short_of_its_plan(tmp_path):
    rows = ["run,step,loss,params,stop"]
    for i in range(5):
        for step in (50, 100):
            loss = "nan" if (i, step) == (2, 100) else f"{3.0 - 0.2 * i - step / 1000:.3f}"
            rows.append(f"r{i},{step},{loss},{1e6 * 2**i:.0f},100")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    res = runner.invoke(app, ["import", "csv", str(tmp_path / "t.csv"), "--run", "run", "--step", "step", "--metric",
                              "eval/loss=loss", "--coord-column", "active_params=params", "--coord-column",
                              "stop_after_steps=stop", "--coord", "tokens_per_step=1000", "--coord",
                              "fit_flops_per_token=unknown", "--coord", "total_params=unknown", "--coord",
                              "role=rung", "--store", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["fit", "endpoint", "--store", str(tmp_path / "s")])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "run 'r2' reached its planned last step, but its eval/loss there is no loss" in said
    assert "nan at step 100" in said and "its last usable value is at step 50" in said
    assert "ends before its planned last step" not in said


def test_olmo_csv_curves_match_the_loader(shared_data):
    # The CLI's CSV path and the benchmark loader sample the same curves.
    csv = shared_data / "olmo_ladder" / "ladder_tidy.csv"
    cols = fitdata.Columns(run="run_id", loss="loss", compute="tokens", step="step", total_steps=None)
    with pytest.raises(LadderError, match="total steps"):
        fitdata.curves_from_csv(csv, cols, np.array([0.5, 1.0]))
    lad, runs = ds.olmo_ladder(shared_data)
    assert set(runs["size"]) == set(ds.OLMO_SIZES)


def test_schedule_aware_laws_read_the_lr_from_each_runs_schedule():
    law = known_law(Momentum, {"lambda": 0.995}, dict(L0=2.6, A=0.6, alpha=0.45, B=0.9),
                    dict(L0=-0.07, A=0.08, alpha=-0.05, B=0.1), scale_ref=1e8)
    runs, hist = [], []
    for i, (scale, decay) in enumerate([(2.5e7, "cosine"), (2.5e7, "linear"), (1e8, "cosine"), (1e8, "linear"),
                                        (4e8, "cosine"), (4e8, "linear")]):
        sched = {"peak_lr": 3e-4, "total_steps": 2000, "warmup_steps": 100, "decay": decay, "min_lr_ratio": 0.1}
        steps = np.arange(100, 2001, 100)
        loss = law.predict(steps, Schedule(**sched).lrs(), scale)
        runs.append({"run_id": f"id{i}", "name": f"r{i}", "group": "g", "role": "rung", "active_params": scale,
                     "fit_flops_per_token": 6 * scale, "planned_tokens": 2000 * 1000, "stop_after_steps": 2000,
                     "state": "finished",
                     "config_json": json.dumps({"run_config": {"schedule": sched}})})
        hist += [{"run_id": f"id{i}", "step": int(s), "tokens": int(s) * 1000, "fraction": s / 2000,
                  "metric": "eval/loss", "value": v} for s, v in zip(steps, loss)]
    store = FakeStore(pd.DataFrame(runs), pd.DataFrame(hist))
    curves = fitdata.lr_curves_from_store(store, "eval/loss", scale="active_params")
    assert [c.scale for c in curves] == [2.5e7, 2.5e7, 1e8, 1e8, 4e8, 4e8]
    assert curves[0].lrs.size == 2000 and curves[0].lrs[99] == pytest.approx(3e-4)
    fit = fit_momentum(curves)
    assert fit.shape["lambda"] == pytest.approx(0.995, rel=1e-3)
    with pytest.raises(LadderError, match="--scale 'nope'"):
        fitdata.lr_curves_from_store(store, "eval/loss", scale="nope")


def test_schedule_aware_laws_refuse_a_csv(curves_csv):
    one_error_line(run("fit", "curve", "--csv", curves_csv, "--law", "multipower"), "LR of every step", "--store")
    one_error_line(run("fit", "curve", "--law", "momentum", "--shape", "lambda"), "--shape")


# ---- the surface from a plain endpoint CSV (params,tokens,loss), and predictions of targets --------
SURFACE = dict(E=1.8, A=480.0, B=2100.0, alpha=0.35, beta=0.37)
TARGETS = [(1e9, 2e10), (1e10, 2e11), (7e10, 1.4e12)]


def surface_csv(path: Path, noise: float = 0.005, **law: float) -> Path:
    """One row per run, nothing but params, tokens, loss: 6 sizes × 5 token ratios."""
    N = np.repeat(np.geomspace(5e7, 5e9, 6), 5)
    D = N * np.tile(np.geomspace(5, 200, 5), 6)
    y = surface_losses(np.random.default_rng(3), N, D, **(SURFACE | law), noise=noise)
    pd.DataFrame({"params": N, "tokens": D, "loss": y}).to_csv(path, index=False)
    return path


def truth(N: float, D: float, **law: float) -> float:
    p = SURFACE | law
    return p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]


@pytest.fixture
def plain_csv(tmp_path) -> Path:
    return surface_csv(tmp_path / "runs.csv")


@pytest.fixture
def targets_csv(tmp_path) -> Path:
    path = tmp_path / "targets.csv"
    pd.DataFrame(TARGETS, columns=["params", "tokens"]).to_csv(path, index=False)
    return path


def test_an_optimum_off_the_runs_token_ratios_is_warned_of():
    """--optimum-at on the (Mis)Fitting runs put 0.222 tokens per parameter where the runs span 1.37–218, unsaid (a
    target of --predict-csv that far off their ratios is warned of)."""
    from ladder.cli.fitsurface import _optima_off_ratios

    N, D = np.array([1e8, 1e9, 1e9]), np.array([1e10, 2e10, 2e11])  # 20 .. 200 tokens per parameter
    inside, low, high = ({"compute": 6 * n * d, "params": n, "tokens": d} for n, d in ((1e9, 5e10), (6.65e11, 1.47e11),
                                                                                      (1e8, 4e10)))
    assert _optima_off_ratios([inside], N, D) == []
    (said,) = _optima_off_ratios([inside, low], N, D)
    assert said.startswith(f"the optimum at C = {low['compute']:.3g} FLOPs puts 0.221 tokens per parameter (N* = "
                           "6.65e+11, D* = 1.47e+11), where the fitted runs span 20 .. 200: the law's optimum lies where")
    assert "400 tokens per parameter" in _optima_off_ratios([high], N, D)[0]


def test_the_form_chosen_names_the_other_form_one_flag_away(plain_csv):
    """The default chose the shared exponent on Epoch's Chinchilla data (its published fit is the free form), and only
    the README's results said --form free."""
    for form, other in (("shared", "--form free (α and β fitted apart, as Hoffmann et al. and Epoch AI's replication "
                                   "fit them)"), ("free", "--form shared (one exponent for N and D)")):
        text = " ".join(run("fit", "surface", "--csv", plain_csv, "--form", form).stdout.split())
        assert f"form: {form} (" in text and f"other forms: {other}" in text


def test_repeated_points_are_said_as_ladders_a_sweep_or_copies_and_seeds_are_not(tmp_path):
    """Two runs at each (params, tokens) told apart by a text column are two ladders; by a fractional number, a sweep
    (an LR sweep was fitted as one ladder, its every LR a draw of its point, unsaid); by a whole number, seeds; and a
    run given twice under another name (its params, tokens and loss the same) was fitted as two runs, unsaid."""
    base = pd.read_csv(surface_csv(tmp_path / "runs.csv"))
    twice = pd.concat([base, base.assign(loss=base["loss"] * 1.01)], ignore_index=True)

    def notes(df: pd.DataFrame, name: str) -> list[str]:
        df.assign(run=[f"r{i}" for i in range(len(df))]).to_csv(tmp_path / name, index=False)
        res = run("fit", "surface", "--csv", tmp_path / name, "--run-col", "run", "--format", "json")
        assert res.exit_code == 0, res.output
        return [n for n in json.loads(res.stdout)["notes"] if "repeats run" in n or "share their" in n]

    (said,) = notes(twice.assign(corpus=["c4"] * 30 + ["pile"] * 30), "corpora.csv")
    assert said.startswith("60 runs share their params, tokens with another run and column 'corpus' tells them apart "
                           "(2 values: c4, pile): one fit treats them as one ladder; give --where corpus=VALUE")
    (said,) = notes(twice.assign(peak_lr=[1e-3] * 30 + [4e-3] * 30), "sweep.csv")
    assert said == ("60 runs share their params, tokens with another run and column 'peak_lr' tells them apart (2 "
                    "values: 0.001, 0.004): a sweep of peak_lr, whose every value one fit takes as a draw of its point "
                    "(a mean over the sweep, not its best); keep each point's best run, or give --where "
                    "peak_lr=VALUE to fit one")
    assert notes(twice.assign(seed=[0] * 30 + [1] * 30), "seeds.csv") == []  # seeds: draws of one point
    (said,) = notes(pd.concat([base, base.iloc[[4, 9]]], ignore_index=True), "copies.csv")
    assert said == ("run 'r30' repeats run 'r4' exactly (params, tokens and final loss), and 1 more run another: one "
                    "run given twice? The fit counts each copy as another run, which narrows the band; leave one out")


def test_fit_surface_reads_a_plain_endpoint_csv(plain_csv):
    res = run("fit", "surface", "--csv", plain_csv, "--form", "free", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_runs"] == 30 and out["shared_exponent"] is False and out["predictions"] == []
    p = out["params"]
    assert p["E"] == pytest.approx(1.8, abs=0.03)
    assert p["alpha"] == pytest.approx(0.35, abs=0.03) and p["beta"] == pytest.approx(0.37, abs=0.03)
    # The explicit flags of a table with no run column still give the same fit.
    flags = run("fit", "surface", "--csv", plain_csv, "--run-col", "", "--step-col", "", "--form", "free",
                "--format", "json")
    assert json.loads(flags.stdout)["params"] == p
    # The default backtests both forms on the six sizes and says which it chose and why.
    auto = json.loads(run("fit", "surface", "--csv", plain_csv, "--format", "json").stdout)["form_choice"]
    assert {r["form"] for r in auto["backtest"]} == {"free", "shared"} and len(auto["backtest"]) == 4
    assert auto["form"] in auto["why"] and "backtest" in auto["why"]
    # and the least-loss law through the runs' lower envelope, whose frontier the band also holds
    env = auto["envelope"]
    assert set(env) == {"runs", "compute", "E", "A", "alpha"} and 3 <= env["runs"] <= 30 and "lower envelope" in auto["why"]
    text = run("fit", "surface", "--csv", plain_csv).stdout
    assert f"lower envelope: {env['runs']} runs" in text


def test_fit_surface_predicts_the_targets_of_a_csv(plain_csv, targets_csv):
    res = run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets_csv, "--bootstrap", "30", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"form", "params", "objective", "bootstrap", "warnings"} <= set(out) and out["bootstrap"]["n"] == 30
    assert "bootstrap" in out["band"] and "Student-t" in out["band"]
    preds = out["predictions"]
    assert [(p["params"], p["tokens"]) for p in preds] == TARGETS
    runs = pd.read_csv(plain_csv)
    for p in preds:
        assert list(p) == ["params", "tokens", "median", "lo50", "hi50", "lo90", "hi90", "efolds_out"]
        assert p["lo90"] <= p["lo50"] <= p["median"] <= p["hi50"] <= p["hi90"]
        assert p["lo90"] <= truth(p["params"], p["tokens"]) <= p["hi90"]
        # how far the target lies beyond the fitted runs, as the band counts it
        assert p["efolds_out"] == pytest.approx(float(distance(p["params"], p["tokens"], runs["params"], runs["tokens"])))
    assert max(p["efolds_out"] for p in preds) > 0
    # Each band is at least the Student-t band of the fit alone.
    alone = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets_csv, "--format", "json").stdout)
    assert alone["band"].startswith("Student-t observation band (2") and "e-fold" in alone["band"]
    for p, t in zip(preds, alone["predictions"]):
        assert p["lo90"] <= t["lo90"] and p["hi90"] >= t["hi90"] and p["lo50"] <= t["lo50"] and p["hi50"] >= t["hi50"]


def test_fit_surface_warns_of_a_target_below_the_fitted_runs(plain_csv):
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--at", "7e10,1.4e12", "--format", "json").stdout)
    assert not [w for w in out["warnings"] if "below the fitted runs" in w or "beyond the fitted runs" in w]
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--at", "7e15,1.4e17", "--format", "json").stdout)
    (far,) = [w for w in out["warnings"] if "beyond the fitted runs" in w]  # counts where billions were meant
    assert far.startswith(f"the target at N = 7e+15, D = 1.4e+17 lies {out['predictions'][0]['efolds_out']:.1f} e-folds")
    res = run("fit", "surface", "--csv", plain_csv, "--at", "70,1400")  # billions and the tokens' scale mistyped
    assert res.exit_code == 0 and "N = 70, D = 1.4e+03 lies below the fitted runs" in res.output.replace("\n", " ")
    assert "e-folds out: how far each target lies outside the fitted runs" in " ".join(res.output.split())
    # far outside, the warning says which way: below the runs, off their token ratios, or above them in size
    def far_warning(at):
        (w,) = [w for w in json.loads(run("fit", "surface", "--csv", plain_csv, "--at", at, "--format", "json").stdout)
                ["warnings"] if "e-folds" in w]
        return w
    assert "e-folds below the fitted runs (" in far_warning("70,1400")
    assert "e-folds off the fitted runs' token ratios (2e+10 tokens per parameter; theirs span " in far_warning("7,1.4e11")
    assert "e-folds in size beyond the fitted runs (" in far_warning("7e15,1.4e17")


def test_fit_surface_json_gives_every_warning_at_its_top(tmp_path):
    """The form choice's warnings (one token ratio, a perplexity-like loss) are in the JSON's top-level warnings,
    once each, as the table prints them, and stay under form_choice too."""
    n = np.array([1e7, 3e7, 1e8, 3e8, 1e9])
    path = tmp_path / "one_ratio.csv"
    pd.DataFrame({"params": n, "tokens": 20 * n, "loss": np.exp(truth(n, 20 * n))}).to_csv(path, index=False)
    out = json.loads(run("fit", "surface", "--csv", path, "--format", "json").stdout)
    ratio = [w for w in out["warnings"] if "every run trains at about one token ratio" in w]
    perplexity = [w for w in out["warnings"] if "is it a perplexity" in w]
    assert len(ratio) == 1 and len(perplexity) == 1 and len(set(out["warnings"])) == len(out["warnings"])
    assert set(out["form_choice"]["warnings"]) <= set(out["warnings"]) and ratio[0] in out["form_choice"]["warnings"]
    text = " ".join(run("fit", "surface", "--csv", path).output.split())
    assert "every run trains at about one token ratio" in text and text.count("is it a perplexity") == 1


def test_fit_surface_prints_the_predictions_as_a_table(plain_csv, targets_csv):
    res = run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets_csv)
    assert res.exit_code == 0, res.output
    assert "predicted loss" in res.stdout and "90% band" in res.stdout and "1.4e+12" in res.stdout
    assert "e-folds out" in res.stdout
    assert "--predict-csv" in run("fit", "surface", "--help").output


def test_fit_surface_names_the_lines_of_targets_given_twice(plain_csv, tmp_path):
    targets = tmp_path / "twice.csv"
    targets.write_text("name,params,tokens\nhero,7e9,1.4e12\nsmall,1e9,2e11\nhero, 7e9 ,1.4e12\nother,1e9,2e11\n")
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets, "--format", "json").stdout)
    assert [p["name"] for p in out["predictions"]] == ["hero", "small", "hero", "other"]  # each line, as given
    said = [w for w in out["warnings"] if "same target" in w]
    assert said == [f"{targets}: lines 2 and 4 give the same target in every column: each line is predicted, as given "
                    "(a row written twice?)"]  # "other" is another name for the size of "small": not the same target


def test_fit_surface_carries_each_targets_other_columns(plain_csv, tmp_path):
    named = tmp_path / "named.csv"
    rows = [("hero-7b", "7e9", "1.4e12", "0.9"), ("NA", "1e9", "2e11", "")]
    named.write_text("name,params,tokens,median\n" + "\n".join(",".join(r) for r in rows) + "\n")
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", named, "--format", "json").stdout)
    preds = out["predictions"]
    # the name travels as written ("NA" is a name); a column named like a band key is not carried over it
    assert [p["name"] for p in preds] == ["hero-7b", "NA"]
    assert list(preds[0]) == ["name", "params", "tokens", "median", "lo50", "hi50", "lo90", "hi90", "efolds_out"]
    assert preds[0]["median"] == pytest.approx(truth(7e9, 1.4e12), rel=0.05)
    assert f"{named}: the targets' column 'median' shares a name with the prediction's own and is not carried into " \
           "the output; rename it to keep the values beside each prediction" in out["warnings"]  # not lost in silence
    own = tmp_path / "own_error.csv"  # no actual loss: no error is computed, and the targets' own column is carried
    own.write_text("name,params,tokens,predicted_error\nhero-7b,7e9,1.4e12,0.01\n")
    kept = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", own, "--format", "json").stdout)
    assert kept["predictions"][0]["predicted_error"] == 0.01 and not any("not carried" in w for w in kept["warnings"])
    table = run("fit", "surface", "--csv", plain_csv, "--predict-csv", named)
    assert table.exit_code == 0, table.output
    assert "hero-7b" in table.stdout and "name" in table.stdout
    # a column of numbers (an actual loss to compare with) comes back as numbers, a blank cell as null
    actual = tmp_path / "actual.csv"
    actual.write_text("name,params,tokens,loss,run\nhero-7b,7e9,1.4e12,2.05,7\nsmall,1e9,2e11,,x1\n")
    preds = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", actual, "--format", "json").stdout)
    assert [(p["loss"], p["run"]) for p in preds["predictions"]] == [(2.05, "7"), (None, "x1")]
    codes = tmp_path / "codes.csv"  # codes with leading zeros stay as written: 007 read as a number came back as 7
    codes.write_text("code,params,tokens,loss\n007,7e9,1.4e12,2.05\n012,1e9,2e11,0.5\n")
    preds = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", codes, "--format", "json").stdout)
    assert [(p["code"], p["loss"]) for p in preds["predictions"]] == [("007", 2.05), ("012", 0.5)]
    actual.write_text("name,params,tokens,loss\nhero-7b,7e9,1.4e12,2.05\nsmall,1e9,2e11,NaN\n")  # as pandas writes
    preds = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", actual, "--format", "json").stdout)
    assert [p["loss"] for p in preds["predictions"]] == [2.05, None]
    table = run("fit", "surface", "--csv", plain_csv, "--predict-csv", actual)
    assert table.exit_code == 0 and "None" not in table.stdout and "2.05" in table.stdout
    error = preds["predictions"][0]["median"] / 2.05 - 1  # the actual loss beside the prediction, and the error
    assert "actual (loss)" in table.stdout and f"{error:+.2%}" in table.stdout
    assert [p["predicted_error"] for p in preds["predictions"]] == [pytest.approx(error), None]  # the JSON too
    ppl = tmp_path / "ppl.csv"  # a perplexity as the actual loss: an "error" of -79%, unsaid
    ppl.write_text("name,params,tokens,loss\nhero-7b,7e9,1.4e12,12.1\nsmall,1e9,2e11,2.3\n")
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", ppl, "--format", "json").stdout)
    (said,) = [w for w in out["warnings"] if "no law misses by that much" in w]
    m = out["predictions"][0]["median"]
    assert said.startswith(f"the targets' actual 'loss' 12.1 is {12.1 / m:.3g}× the prediction {m:.4g}: no law misses")
    assert "is it a perplexity (give its log)" in said
    assert not [w for w in json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", actual, "--format",
                                          "json").stdout)["warnings"] if "no law misses" in w]
    actual.write_text("name,params,tokens,actual\nhero-7b,7e9,1.4e12,2.05\n")  # a column named actual: said once
    table = run("fit", "surface", "--csv", plain_csv, "--predict-csv", actual)
    assert table.exit_code == 0 and "actual (actual)" not in table.stdout and "actual" in table.stdout
    wide = tmp_path / "wide.csv"  # a targets' table of many columns: two shown whole, the rest said to be in the JSON
    wide.write_text("name,params,tokens,size,lr,batch,seq,notes\n" + "a-very-long-target-name-of-the-ladder,7e9,1.4e12,"
                    "7B,3e-4,4M,4096,first\n")
    table = run("fit", "surface", "--csv", plain_csv, "--predict-csv", wide)
    assert table.exit_code == 0 and "…" not in table.stdout  # nothing cut short
    assert "the targets' other 4 columns are in --format json" in " ".join(table.stdout.split())


def test_the_targets_actual_loss_goes_by_the_runs_loss_column_too(plain_csv, tmp_path):
    """With --loss-col c4 the targets' c4 column is their actual loss: it was shown as a label, with no error."""
    runs = tmp_path / "c4.csv"
    pd.read_csv(plain_csv).rename(columns={"loss": "c4"}).to_csv(runs, index=False)
    targets = tmp_path / "targets_c4.csv"
    targets.write_text("name,params,tokens,c4,loss_note\nhero-7b,7e9,1.4e12,2.05,x\n")
    out = json.loads(run("fit", "surface", "--csv", runs, "--loss-col", "c4", "--predict-csv", targets, "--format",
                         "json").stdout)
    (p,) = out["predictions"]
    assert p["predicted_error"] == pytest.approx(p["median"] / 2.05 - 1)
    table = run("fit", "surface", "--csv", runs, "--loss-col", "c4", "--predict-csv", targets)
    assert table.exit_code == 0 and "actual (c4)" in table.stdout and f"{p['median'] / 2.05 - 1:+.2%}" in table.stdout


def test_the_band_text_says_a_form_no_backtest_scored_is_widened_by_the_floor_alone(plain_csv):
    """--form kaplan on runs of no isoFLOP sweep: the form line said the bands were widened by the floor (no backtest
    tries it there), the band's own text by "the form backtest's error"."""
    named = json.loads(run("fit", "surface", "--csv", plain_csv, "--form", "kaplan", "--format", "json").stdout)
    assert "kaplan" not in {r["form"] for r in named["form_choice"]["backtest"]}
    assert named["band"].endswith("widened in quadrature by 1% (one sd) per e-fold of extrapolation (no backtest "
                                  "scored this form)"), named["band"]
    free = json.loads(run("fit", "surface", "--csv", plain_csv, "--form", "free", "--format", "json").stdout)
    assert "the form backtest's error per e-fold" in free["band"] and "no backtest" not in free["band"]


def test_fit_surface_with_one_exponent(tmp_path):
    csv = surface_csv(tmp_path / "shared.csv", alpha=0.36, beta=0.36)
    out = json.loads(run("fit", "surface", "--csv", csv, "--shared-exponent", "--format", "json").stdout)
    assert out["shared_exponent"] is True
    assert out["params"]["alpha"] == out["params"]["beta"] == pytest.approx(0.36, abs=0.02)
    assert "alpha = beta" in run("fit", "surface", "--csv", csv, "--shared-exponent").stdout
    assert json.loads(run("fit", "surface", "--csv", csv, "--form", "shared", "--format", "json").stdout)["params"] \
        == out["params"]
    one_error_line(run("fit", "surface", "--csv", csv, "--shared-exponent", "--form", "free"), "--shared-exponent",
                   "--form free")


def test_bad_surface_input_is_one_line_and_exit_2(plain_csv, targets_csv, tmp_path):
    def write(name: str, text: str) -> Path:
        (tmp_path / name).write_text(text)
        return tmp_path / name

    no_loss = write("no_loss.csv", "params,tokens\n1e8,1e9\n")
    one_error_line(run("fit", "surface", "--csv", no_loss), "no column 'loss'")
    # Checkpoints (a step column) without a run column are not taken for one row per run.
    steps = write("steps.csv", "params,tokens,step,loss\n1e8,1e9,10,3.5\n1e8,2e9,20,3.1\n")
    one_error_line(run("fit", "surface", "--csv", steps), "no column 'run_id'",
                   "give --run-col '' where each row is its own run")
    nd = write("nd.csv", "N,D,loss\n1e8,2e9,3.1\n")
    one_error_line(run("fit", "surface", "--csv", nd), "no column 'params' (for --params-col)", "give --params-col N")
    no_tokens = write("no_tokens.csv", "params,loss\n1e8,3.0\n")
    one_error_line(run("fit", "surface", "--csv", no_tokens), "no column 'tokens'")
    words = write("words.csv", "params,tokens,loss\n1e8,2e9,3.1\nabc,4e9,3.0\n")
    one_error_line(run("fit", "surface", "--csv", words), "column 'params'", "'abc', which is not a number", "line 3")
    people = write("people.csv", 'params,tokens,loss\n1e8,2e9,3.1\n"20,000,000",4e9,3.0\n')
    one_error_line(run("fit", "surface", "--csv", people), "'20,000,000', which is not a number (write it without "
                   "thousands separators)")
    people.write_text("params,tokens,loss\n1e8,2e9,3.1\n1.4B,4e9,3.0\n")
    one_error_line(run("fit", "surface", "--csv", people), "'1.4B', which is not a number (suffixes such as K, M, B")
    neg = write("neg.csv", "params,tokens,loss\n" + "\n".join(f"{n},{n * 20},-2.5" for n in (1e8, 2e8)) + "\n")
    one_error_line(run("fit", "surface", "--csv", neg), "column 'loss'", "non-positive", "'-2.5'")
    for empty in (write("empty.csv", ""), write("header.csv", "params,tokens\n")):
        one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", empty), "has no rows", "params,tokens")
    zero = write("zero.csv", "params,tokens\n1e9,2e10\n0,1e12\n")
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", zero), "column 'params'", "0", "line 3")
    text = write("text.csv", "params,tokens\n1e9,lots\n")
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", text), "column 'tokens'", "'lots'")
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", tmp_path / "nope.csv"), "no such file")
    named = write("named.csv", "Run,N,D\nbig,1e9,2e10\n")  # --params-col names the runs' column: renaming is the way
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", named), "the targets have no column "
                   "'params' for their parameter counts N; the file has Run, N, D; rename its column 'N' to 'params'")
    plain_csv.with_name("runs_nd.csv").write_text(plain_csv.read_text().replace("params,tokens", "size,data", 1))
    one_error_line(run("fit", "surface", "--csv", plain_csv.with_name("runs_nd.csv"), "--params-col", "size",
                       "--tokens-col", "data", "--predict-csv", write("n_only.csv", "params,D\n1e9,2e10\n")),
                   "no column 'tokens' or 'data' for their token counts D", "rename its column 'D' to 'tokens'")
    one_error_line(run("fit", "surface", "--csv", ""), "--csv '': an empty path; give a file or folder")
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets_csv, "--at", "1e9,1e10"),
                   "--at and --predict-csv")
    # sizes no run has: a typo or another unit, refused before they overflow 6·N·D or the band
    huge = write("huge.csv", plain_csv.read_text().rstrip("\n") + "\n1e30,2e10,2.5\n")
    one_error_line(run("fit", "surface", "--csv", huge), "column 'params'", "'1e30', above 1e+18", "line 32")
    far = write("far.csv", "params,tokens\n1e9,2e10\n1e50,2e10\n")
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", far), "(targets)", "'1e50'", "line 3")
    small = write("small.csv", "params,tokens\n1e9,2e10\n0.5,2e10\n")  # in billions?
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--predict-csv", small), "'0.5', below 1", "line 3")
    for at, says in (("1e300,1e12", "N = 1e+300"), ("1e9,1e-300", "D = 1e-300"), ("1e9,1e21", "D = 1e+21")):
        one_error_line(run("fit", "surface", "--csv", plain_csv, "--at", at), f"--at '{at}'", says, "counts from 1")
    # a misspelt step column is refused, not read as the file's order
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--step-col", "stepz"), "no column 'stepz'", "--step-col")


def test_a_users_csv_is_read_as_written_or_refused_with_its_line(plain_csv, tmp_path):
    rows = plain_csv.read_text().splitlines()
    header, body = rows[0], rows[1:]

    def write(name: str, text: str) -> Path:
        (tmp_path / name).write_text(text)
        return tmp_path / name

    def fitted(path: Path, *more: str) -> dict:
        res = run("fit", "surface", "--csv", path, "--form", "free", "--format", "json", *more)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    plain = fitted(plain_csv)
    # spaces around the names and values, and blank lines, change nothing
    spaced = write("spaced.csv", " params , tokens,loss \n" + "\n\n".join(r.replace(",", ", ") for r in body) + "\n")
    assert fitted(spaced)["params"] == plain["params"]
    # "NA" is a run id like any other; a flag column with text drops the flagged rows and says how many
    ids = write("ids.csv", "run_id,flag," + header + "\n" + "\n".join(
        f"{'NA' if i == 0 else f'r{i}'},{'suspect: repeated losses' if i in (3, 4) else ''},{r}" for i, r in enumerate(body)))
    assert fitted(ids)["n_runs"] == 30
    dropped = fitted(ids, "--drop-col", "flag")
    assert dropped["n_runs"] == 28 and any("2 of 30 rows left out" in n and "line 5" in n for n in dropped["notes"])
    # rows the fit would have merged or lost: refused, naming the line
    empty_id = write("empty_id.csv", "run_id," + header + "\n" + "\n".join(f"{'' if i == 2 else i},{r}" for i, r in enumerate(body)))
    one_error_line(run("fit", "surface", "--csv", empty_id), "line 4", "empty run id")
    by_size = write("by_size.csv", "run_id," + header + "\n" + "\n".join(f"{r.split(',')[0]},{r}" for r in body))
    one_error_line(run("fit", "surface", "--csv", by_size), "has 5 rows", "no step column", "--step-col")
    twice = write("twice.csv", "\n".join([header] + body + body[:1]) + "\n")
    one_error_line(run("fit", "surface", "--csv", twice), "lines 2 and 32", "written twice")
    blank = write("blank.csv", "\n".join([header, body[0], "", body[1], "1e9,2e10,oops"]) + "\n")
    one_error_line(run("fit", "surface", "--csv", blank), "line 5", "'oops', which is not a number")
    # what a wrong column or separator looks like, said
    one_error_line(run("fit", "surface", "--csv", write("upper.csv", header.title() + "\n" + "\n".join(body))),
                   "no column 'loss'", "did you mean 'Loss'?")
    # lines ended by a bare carriage return (an old Mac tool) read as any other
    (tmp_path / "cr.csv").write_bytes(("\r".join(rows) + "\r").encode())
    assert fitted(tmp_path / "cr.csv")["params"] == plain["params"]
    a, b = body[1].rsplit(",", 1)  # the last value opens a quote that no line closes
    unclosed = write("unclosed.csv", "\n".join([header, body[0], f'{a},"{b}'] + body[2:]) + "\n")
    never_closed = ("unclosed.csv: cannot read it as a table", "a quoted value is never closed")
    one_error_line(run("fit", "surface", "--csv", unclosed), *never_closed)
    one_error_line(run("import", "csv", unclosed, "--store", tmp_path / "s", "--metric", "eval/loss=loss"), *never_closed)
    tabs = write("tabs.csv", "\n".join(r.replace(",", "\t") for r in rows))  # read as separated by tabs
    assert fitted(tabs)["params"] == plain["params"]
    pipes = write("pipes.csv", "\n".join(r.replace(",", "|") for r in rows))
    one_error_line(run("fit", "surface", "--csv", pipes), "separated by '|'", "save it with commas")
    one_error_line(run("fit", "surface", "--csv", tmp_path), "a directory, not a CSV file")
    one_error_line(run("fit", "surface", "--csv", plain_csv, "--at", "-7e10,1e12"), "--at", "not a positive number")
    one_error_line(run("fit", "endpoint", "--csv", plain_csv, "--compute-col", "tokens", "--at", "0"), "--at")


def test_fit_surface_reads_one_corpus_of_a_table_of_several(tmp_path):
    # two corpora with different laws in one table: --where picks one, and the fit is that corpus's alone
    a = pd.read_csv(surface_csv(tmp_path / "a.csv")).assign(dataset="c4", epochs=1)
    b = pd.read_csv(surface_csv(tmp_path / "b.csv", E=2.4)).assign(dataset="pile", epochs=1.0)
    both = tmp_path / "both.csv"
    pd.concat([a, b]).to_csv(both, index=False)
    alone = json.loads(run("fit", "surface", "--csv", tmp_path / "a.csv", "--form", "free", "--format", "json").stdout)
    res = run("fit", "surface", "--csv", both, "--where", "dataset=c4", "--where", "epochs=1", "--form", "free",
              "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_runs"] == 30 and out["params"] == alone["params"]  # 1.0 and 1 are one number
    targets = tmp_path / "targets.csv"  # the targets of the corpus fitted are predicted; the others are said
    targets.write_text("name,params,tokens,dataset\nA,1e9,2e10,c4\nB,1e9,2e10,pile\nC,1e9,2e10,\nD,1e9,2e10,C4\n")
    res = run("fit", "surface", "--csv", both, "--where", "dataset=c4", "--predict-csv", targets, "--form", "free",
              "--format", "json")
    out = json.loads(res.stdout)
    assert [p["name"] for p in out["predictions"]] == ["A", "C"]
    assert f"{targets}: 2 of 4 targets left out by --where dataset=c4: line 3 (dataset 'pile'), line 5 (dataset 'C4')" \
        in out["warnings"]
    pile = json.loads(run("fit", "surface", "--csv", both, "--where", "dataset=pile", "--form", "free",
                          "--format", "json").stdout)
    assert pile["params"]["E"] == pytest.approx(2.4, abs=0.05)
    one_error_line(run("fit", "surface", "--csv", both, "--where", "dataset=c5"), "no row has dataset = 'c5'",
                   "c4, pile")
    one_error_line(run("fit", "surface", "--csv", both, "--where", "corpus=c4"), "no column 'corpus'", "dataset")
    one_error_line(run("fit", "surface", "--csv", both, "--where", "c4"), "--where 'c4'", "COLUMN=VALUE")
    one_error_line(run("fit", "surface", "--where", "dataset=c4"), "--where filters the rows of a CSV", "--group")
    # and the store's choices are refused with a CSV, not ignored
    one_error_line(run("fit", "surface", "--csv", both, "--group", "g1"), "--group only means something for the store's runs",
                   "--where COLUMN=VALUE")
    one_error_line(run("backtest", "--csv", both, "--role", "", "--compute", "fit", "--form", "endpoint"),
                   "--role and --compute only mean something for the store's runs", "drop them")
    one_error_line(run("backtest", "--csv", both, "--role", "", "--form", "surface"),
                   "--role only means something for the store's runs (which runs)", "--params-col, --tokens-col")
    one_error_line(run("fit", "curve", "--csv", both, "--store", tmp_path / "s", "--run-col", "run"), "--store")
    # the other fit commands take it too
    bt = run("backtest", "--form", "surface", "--csv", both, "--where", "dataset=c4", "--format", "json")
    assert bt.exit_code == 0, bt.output  # a table of one row per run, as `fit surface` reads it
    only = run("backtest", "--form", "surface", "--csv", tmp_path / "a.csv", "--run-col", "", "--format", "json")
    assert json.loads(bt.stdout) == json.loads(only.stdout)


def test_a_stored_run_whose_final_loss_is_not_positive_is_named(tmp_path):
    table = tmp_path / "finals.csv"
    table.write_text("run_id,params,tokens,loss\n" + "\n".join(
        f"r{i},{n:g},{20 * n:g},{-1 if i == 2 else 3 - 0.1 * i}" for i, n in enumerate((1e8, 2e8, 4e8, 8e8))))
    res = run("import", "csv", table, "--store", tmp_path / "s", "--run", "run_id", "--tokens", "tokens",
              "--metric", "eval/loss=loss", "--coord-column", "active_params=params", "--coord", "role=rung")
    assert res.exit_code == 0, res.output
    refused = run("fit", "surface", "--store", tmp_path / "s")
    one_error_line(refused, "run 'r2' has no positive, finite eval/loss")
    # the advice takes that one run out (--group / --role would take its whole group)
    said = " ".join(refused.output.split())
    assert f"take it out of the store with `ladder runs --remove r2 --store {tmp_path / 's'}`" in said
    removed = run("runs", "--remove", "r2", "--store", tmp_path / "s", "--yes")
    assert removed.exit_code == 0, removed.output
    res = run("fit", "surface", "--store", tmp_path / "s")
    one_error_line(res, "needs at least 5 runs of distinct (N, D) (or 4 with E pinned, --E), got 3")  # r2 left out, the three others in


def test_a_fit_refused_for_too_few_finished_runs_names_the_runs_left_out(tmp_path):
    table = tmp_path / "finals.csv"
    table.write_text("run_id,params,tokens,loss,state\n" + "\n".join(
        f"r{i},{n:g},{20 * n:g},{3 - 0.1 * i},{'crashed' if i == 3 else 'finished'}"
        for i, n in enumerate((1e8, 2e8, 4e8, 8e8))))
    res = run("import", "csv", table, "--store", tmp_path / "s", "--run", "run_id", "--tokens", "tokens",
              "--metric", "eval/loss=loss", "--coord-column", "active_params=params", "--coord", "role=rung")
    assert res.exit_code == 0, res.output
    left = "(left out, not finished (the law fits final losses): r3 (crashed))"
    one_error_line(run("fit", "surface", "--store", tmp_path / "s"), "needs at least 5 runs", left)
    one_error_line(run("backtest", "--store", tmp_path / "s"), "holding out the 1 largest leaves 2 runs",
                   "the ladder needs more runs for a backtest", left)
    res = run("fit", "endpoint", "--store", tmp_path / "s", "--format", "json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["notes"][-1] == left[1:-1]


def test_a_csv_of_checkpoints_with_planned_steps_leaves_out_a_run_that_stopped_short(tmp_path, shared_data):
    """The published 535B ladder's checkpoints: its largest rung crashed at 80% of its plan. With each run's planned
    steps in the table, its last checkpoint is not taken for a final loss (it would move the hero's loss by 8%)."""
    import csv

    data = shared_data / "marin_ladder"
    runs = {r["rung"]: r for r in csv.DictReader(open(data / "marin_ladder_runs.csv"))}
    seen, lines = set(), ["run_id,step,loss,compute,total_steps"]
    for r in csv.DictReader(open(data / "marin_ladder_evals.csv")):
        if (r["rung"], r["step"]) in seen:  # a checkpoint written twice
            continue
        seen.add((r["rung"], r["step"]))
        R = runs[r["rung"]]
        lines.append(f"{r['rung']},{r['step']},{r['loss']},{float(R['fit_flops_per_step']) * int(r['step'])},"
                     f"{R['stop_after_steps']}")
    table = tmp_path / "marin.csv"
    table.write_text("\n".join(lines) + "\n")
    res = run("fit", "endpoint", "--csv", table, "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_runs"] == 3
    assert out["notes"][-1] == ("left out, stopped short of its plan ('total_steps'; the law fits final losses): "
                                "d2048 (at step 16,063 of 20,072)")
    one_error_line(run("fit", "endpoint", "--csv", table, "--where", "run_id=d2048"),
                   "no run reaches the end of its plan", "d2048 (at step 16,063 of 20,072)")
    table.write_text(table.read_text().replace("total_steps", "planned"))  # a column of another name is not read
    res = run("fit", "endpoint", "--csv", table, "--format", "json")
    assert json.loads(res.stdout)["n_runs"] == 4  # nothing tells the plan: every last checkpoint is a final
    res = run("fit", "endpoint", "--csv", table, "--total-steps-col", "planned", "--format", "json")
    assert json.loads(res.stdout)["n_runs"] == 3 and "d2048 (at step " in json.loads(res.stdout)["notes"][-1]
    one_error_line(run("backtest", "--form", "endpoint", "--csv", table, "--total-steps-col", "planned"),
                   "holding out the 1 largest leaves 2 runs", "d2048 (at step ")
    one_error_line(run("fit", "endpoint", "--csv", table, "--total-steps-col", "plnned"), "plnned")
    # found by its name (not named): a blank cell is a plan not known, not a bad row; '' reads no such column
    text = table.read_text().replace("planned", "total_steps").splitlines()
    blank = [text[0]] + [",".join(line.split(",")[:-1] + [""]) if line.startswith("d2048") else line for line in text[1:]]
    table.write_text("\n".join(blank) + "\n")
    res = run("fit", "endpoint", "--csv", table, "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout)["n_runs"] == 4, res.output  # d2048's plan unknown: kept
    table.write_text("\n".join(text) + "\n")
    res = run("fit", "endpoint", "--csv", table, "--total-steps-col", "", "--format", "json")
    assert json.loads(res.stdout)["n_runs"] == 4


def test_a_csv_state_column_leaves_out_the_runs_not_finished_as_the_store_does(tmp_path):
    table = tmp_path / "finals.csv"
    rows = [(f"r{i}", c, 2 + 60 * c ** -0.1, "finished") for i, c in enumerate((1e18, 3e18, 1e19, 3e19, 1e20))]
    rows.append(("r5", 3e20, 2.9, " Crashed"))  # stopped early: its last eval is far above the law
    table.write_text("run_id,compute,loss,state\n" + "\n".join(f"{r},{c:g},{y},{s}" for r, c, y, s in rows))
    res = run("fit", "endpoint", "--csv", table, "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["notes"][-1] == "left out, not finished (the law fits final losses): r5 (crashed)"
    assert out["n_runs"] == 5
    one_error_line(run("fit", "endpoint", "--csv", table, "--where", "run_id=r5"),
                   "no run's 'state' is finished", "r5 (crashed)")
    table.write_text(table.read_text().replace(" Crashed", "done"))
    one_error_line(run("fit", "endpoint", "--csv", table), "line 7", "state 'done' is not one of")


def test_runs_imported_without_a_role_are_pointed_to_role_empty(tmp_path):
    table = tmp_path / "finals.csv"
    table.write_text("run_id,params,tokens,loss\n" + "\n".join(
        f"r{i},{n:g},{20 * n:g},{3 - 0.1 * i}" for i, n in enumerate((1e8, 2e8, 4e8, 8e8))))
    res = run("import", "csv", table, "--store", tmp_path / "s", "--run", "run_id", "--tokens", "tokens",
              "--metric", "eval/loss=loss", "--coord-column", "active_params=params")
    assert res.exit_code == 0, res.output
    one_error_line(run("fit", "surface", "--store", tmp_path / "s"), "no runs match (role 'rung', finished)",
                   "the store's runs have role none: --role '' takes every role")


def test_a_run_reaches_its_end_when_no_later_eval_was_due():
    every_128 = np.arange(128, 24_001, 128) / 24_000  # the last eval at step 23,936 of 24,000
    assert fitdata.reached_end(every_128) and fitdata.reached_end(np.array([0.5, 1.0]))
    assert not fitdata.reached_end(every_128[:-5])  # stopped five evals early
    assert not fitdata.reached_end(np.arange(1, 17) * 0.05)  # evals every 5%, the last at 80%
    assert not fitdata.reached_end(np.array([0.99])) and not fitdata.reached_end(np.array([]))
    every_100 = np.arange(100, 1_001, 100) / 1_000
    assert fitdata.reached_end(every_100) and not fitdata.reached_end(every_100[:-1])  # one eval owed, at the end
    assert fitdata.reached_end(np.arange(99, 1_000, 100) / 1_000)  # steps counted from 0: the last at 999 of 1,000
    assert list(fitdata.at_end(every_100[:-1])) == list(every_100[:-1])  # not moved to the end
    # a trainer that evaluates at step 0, k, 2k, ... never at its last step: its last eval, a whole interval before
    # the end, is its final; and so is any run's where the source says it finished (not where it says it did not)
    from_0 = np.arange(0, 1_000, 100) / 1_000
    assert fitdata.reached_end(from_0) and fitdata.at_end(from_0)[-1] == 1.0
    assert fitdata.reached_end(every_100[:-1], finished=True) and not fitdata.reached_end(from_0, finished=False)
    assert not fitdata.reached_end(every_100[:-2], finished=True)  # two intervals short: stopped, whatever is said


def _checkpoints(tmp_path, last: dict[str, int]) -> Path:
    """A table of checkpoints every 100 of 1,000 planned steps, five runs on one power law; run `r` logs up to
    `last[r]`."""
    lines = ["run_id,step,loss,compute,params,tokens,total_steps"]
    for i, n in enumerate((1e7, 3e7, 1e8, 3e8, 1e9)):
        run_id = f"r{i}"
        for step in range(100, last.get(run_id, 1_000) + 1, 100):
            d = 20 * n * step / 1_000
            lines.append(f"{run_id},{step},{1.7 + 400 * (6 * n * d) ** -0.15:.6f},{6 * n * d:g},{n:g},{d:g},1000")
    table = tmp_path / "ck.csv"
    table.write_text("\n".join(lines) + "\n")
    return table


def test_a_run_one_eval_short_of_its_plan_gives_no_final(tmp_path):
    """Evals every 10% that end at 90%: one was owed at the end, so the last is no final loss (on a decaying
    schedule the last tenth is where the loss falls fastest)."""
    res = run("fit", "endpoint", "--csv", _checkpoints(tmp_path, {"r2": 900}), "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_runs"] == 4
    assert out["notes"][-1] == ("left out, stopped short of its plan ('total_steps'; the law fits final losses): "
                                "r2 (at step 900 of 1,000)")


def test_a_state_column_that_says_finished_counts_a_last_eval_one_interval_short(tmp_path):
    """A table that says a run finished (its `state` column, as `ladder import csv` reads it: a blank is finished)
    settles the run whose last eval is one interval before its plan's end, as a store's state does; crashed is
    left out, and two intervals short is short whatever is said."""
    table = pd.read_csv(_checkpoints(tmp_path, {"r2": 900, "r3": 900, "r4": 800}))
    table["state"] = table["run_id"].map({"r2": "finished", "r3": "", "r4": "finished"}).fillna("finished")
    table.to_csv(tmp_path / "state.csv", index=False)
    res = run("fit", "endpoint", "--csv", tmp_path / "state.csv", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_runs"] == 4  # r0, r1, r2 and r3 (finished at step 900)
    assert ("left out, stopped short of its plan ('total_steps'; the law fits final losses): "
            "r4 (at step 800 of 1,000)") in out["notes"]
    short = table[table["run_id"].isin(["r3", "r4"])]
    short = short.assign(state=np.where(short["run_id"] == "r3", "crashed", ""))
    short.to_csv(tmp_path / "short.csv", index=False)
    one_error_line(run("fit", "endpoint", "--csv", tmp_path / "short.csv"), "no run reaches the end of its plan",
                   "say so in a 'state' column (finished)")


def test_a_run_far_past_its_plan_is_refused_by_the_fits_of_finals(tmp_path):
    """Steps at 1.5× a run's planned steps or more: the step column or the plan is wrong, as `ladder import csv`
    and `fit curve` say; the fits of final losses refuse it too, naming the line."""
    table = _checkpoints(tmp_path, {"r3": 1_500})
    for args in (("fit", "endpoint"), ("fit", "surface"), ("backtest", "--form", "endpoint")):
        one_error_line(run(*args, "--csv", table), "run 'r3' at step 1,500, 1.5× its planned steps",
                       "fix the step or the run's planned steps")


def test_curves_of_several_token_ratios_are_noted():
    runs = pd.DataFrame({"active_params": pd.array([1e8, 2e8, 1e8, None], dtype="Int64"),
                         "planned_tokens": pd.array([2e9, 4e9, 2e10, 5e9], dtype="Int64")})
    (note,) = fitdata._ratios_note(runs)
    assert note.startswith("the runs train at 2 token ratios (20–200 tokens per parameter)")
    assert "--group NAME, with the group given at import or pull (--coord group=NAME" in note and "--where" not in note
    assert fitdata._ratios_note(runs.iloc[:2]) == ()  # one ratio


def test_resamples_and_holdouts_are_checked_before_any_fit(endpoint_csv):
    one_error_line(run("fit", "endpoint", "--csv", endpoint_csv, "--bootstrap", "100000000"), "--bootstrap 100000000",
                   "give 0 (none) or 2 to 10,000 refits")
    for command in (("fit", "endpoint"), ("backtest",)):  # one refit is no band: said before any fit, as above
        one_error_line(run(*command, "--csv", endpoint_csv, "--bootstrap", "1"), "--bootstrap 1: give 0 (none) or 2")
    one_error_line(run("fit", "endpoint", "--csv", endpoint_csv, "--bootstrap", "-1"), "--bootstrap -1")
    one_error_line(run("compare", "a", "b", "--bootstrap", "20000"), "--bootstrap 20000")
    one_error_line(run("predict", "--target", endpoint_csv, "--n-boot", "5"), "--n-boot 5", "give 20 to 10,000")
    for bad in ("0", "abc"):
        one_error_line(run("backtest", "--csv", endpoint_csv, "--holdout", bad), "--holdout")
    assert "compute, parameters" not in run("backtest", "--csv", endpoint_csv, "--holdout", "0").output


def test_fit_surface_notes_a_table_that_holds_several_ladders(tmp_path):
    a = pd.read_csv(surface_csv(tmp_path / "a.csv")).assign(dataset="web")
    b = pd.read_csv(surface_csv(tmp_path / "b.csv", E=2.1)).assign(dataset="code")
    both = tmp_path / "both.csv"
    pd.concat([a, b]).to_csv(both, index=False)
    out = json.loads(run("fit", "surface", "--csv", both, "--format", "json").stdout)
    (note,) = [n for n in out["notes"] if "ladder" in n]
    assert "60 runs" in note and "'dataset'" in note and "--where dataset=VALUE" in note
    assert "--where dataset=VALUE" in run("fit", "surface", "--csv", both).output
    one = json.loads(run("fit", "surface", "--csv", both, "--where", "dataset=web", "--format", "json").stdout)
    assert one["n_runs"] == 30 and not [n for n in one["notes"] if "ladder" in n]
    # repeats that no text column tells apart are seeds of one ladder (a column of numbers names them): no note
    seeds = tmp_path / "seeds.csv"
    pd.concat([a.assign(seed=0), a.assign(loss=a["loss"] * 1.001, seed=1)]).drop(columns="dataset").to_csv(
        seeds, index=False)
    assert not [n for n in json.loads(run("fit", "surface", "--csv", seeds, "--format", "json").stdout)["notes"]
                if "ladder" in n]


def test_where_picks_the_targets_of_the_ladder_it_fits(tmp_path):
    a = pd.read_csv(surface_csv(tmp_path / "a.csv")).assign(dataset="web")
    b = pd.read_csv(surface_csv(tmp_path / "b.csv", E=2.1)).assign(dataset="code")
    both = tmp_path / "both.csv"
    pd.concat([a, b]).to_csv(both, index=False)
    targets = tmp_path / "targets.csv"
    pd.DataFrame({"name": ["w", "c"], "dataset": ["web", "code"], "params": [2e10, 2e10],
                  "tokens": [4e11, 4e11]}).to_csv(targets, index=False)
    out = json.loads(run("fit", "surface", "--csv", both, "--where", "dataset=code", "--predict-csv", targets,
                         "--format", "json").stdout)
    assert [p["name"] for p in out["predictions"]] == ["c"]
    assert out["predictions"][0]["median"] == pytest.approx(truth(2e10, 4e11, E=2.1), rel=0.02)
    # targets without the column are all the fitted ladder's
    pd.DataFrame({"params": [2e10, 3e10], "tokens": [4e11, 6e11]}).to_csv(targets, index=False)
    out = json.loads(run("fit", "surface", "--csv", both, "--where", "dataset=code", "--predict-csv", targets,
                         "--format", "json").stdout)
    assert len(out["predictions"]) == 2
    # a target whose cell is blank names no other ladder: it is kept
    pd.DataFrame({"name": ["w", "any", "c"], "dataset": ["web", "", "code"], "params": [2e10] * 3,
                  "tokens": [4e11] * 3}).to_csv(targets, index=False)
    out = json.loads(run("fit", "surface", "--csv", both, "--where", "dataset=code", "--predict-csv", targets,
                         "--format", "json").stdout)
    assert [p["name"] for p in out["predictions"]] == ["any", "c"]
    pd.DataFrame({"dataset": ["web"], "params": [2e10], "tokens": [4e11]}).to_csv(targets, index=False)
    res = run("fit", "surface", "--csv", both, "--where", "dataset=code", "--predict-csv", targets)
    assert res.exit_code == 2 and "no row has dataset = 'code'" in res.output and "(targets)" in res.output


def test_every_row_a_run_over_a_table_of_checkpoints_is_noted(tmp_path):
    """--run-col '' over a table whose run_id repeats: each checkpoint is fitted as a run, and the note says so and
    how to read each run's last row instead (not to pick one run with --where)."""
    path = tmp_path / "checkpoints.csv"
    pd.DataFrame({"run_id": ["a"] * 3 + ["b"] * 3 + ["c"] * 3, "step": [1, 2, 3] * 3,
                  "loss": [4, 3.5, 3.2, 3.8, 3.3, 3.0, 3.6, 3.1, 2.8],
                  "compute": [1e17, 2e17, 3e17, 2e17, 4e17, 6e17, 4e17, 8e17, 1.2e18]}).to_csv(path, index=False)
    rows = json.loads(run("fit", "endpoint", "--csv", path, "--run-col", "", "--format", "json").stdout)
    assert rows["n_runs"] == 9
    assert [n for n in rows["notes"] if n.startswith("column 'run_id' names 3 runs over 9 rows, and each row is fitted "
                                                       "as a finished run (--run-col ''): if the rows are checkpoints")]
    assert not [n for n in rows["notes"] if "--where run_id" in n]
    runs = json.loads(run("fit", "endpoint", "--csv", path, "--format", "json").stdout)
    assert runs["n_runs"] == 3 and not [n for n in runs["notes"] if "names 3 runs" in n]


def test_fit_endpoint_notes_runs_of_several_token_ratios(tmp_path):
    """The endpoint law is for one token ratio: a table that mixes three (not a sweep) gets a note pointing to a
    filter and to the surface; runs of one ratio get none."""
    n = np.geomspace(5e7, 2e9, 12)
    ratio = np.array([5.0, 20.0, 80.0] * 4)
    for r, said in ((ratio, "the runs train at 3 token ratios (5–80 tokens per parameter), and the endpoint law holds "
                     "for one: its fit mixes them"), (np.full(12, 20.0), None)):
        path = tmp_path / "runs.csv"
        pd.DataFrame({"params": n, "tokens": n * r, "loss": truth(n, n * r), "compute": 6 * n * n * r}).to_csv(path, index=False)
        notes = json.loads(run("fit", "endpoint", "--csv", path, "--format", "json").stdout)["notes"]
        mixed = [x for x in notes if "token ratios" in x]
        assert (mixed == []) if said is None else (mixed[0].startswith(said) and "`ladder fit surface`" in mixed[0])
        if said is not None:  # a CSV's rows are picked with --where; a store's runs have no --where, but their groups
            assert "--where COLUMN=VALUE picks the rows of one" in mixed[0]
            from types import SimpleNamespace

            from ladder.cli.fitendpoint import endpoint_points
            stored = SimpleNamespace(params=n, tokens=n * r, compute=6 * n * n * r, loss=truth(n, n * r), notes=())
            (note,) = [x for x in endpoint_points(stored, None)[3] if "token ratios" in x]
            assert "--group NAME, with the group given at import or pull" in note and "--where" not in note


def test_fit_endpoint_on_a_table_of_params_and_tokens_points_to_the_surface(plain_csv):
    res = run("fit", "endpoint", "--csv", plain_csv)
    assert res.exit_code == 2
    assert "no column 'compute'" in res.output and "ladder fit surface" in res.output


def test_a_tables_spelling_of_a_value_a_header_or_a_target_loss_is_met_or_named(plain_csv, tmp_path):
    """--where matches a value written in another case (a spreadsheet's FALSE) where none is written as given; a
    column option with spaces around the name finds the header (whose spaces are ignored); a target loss that is
    not a number is warned, not silently dropped; a CSV given bare to a command that takes --csv says so."""
    df = pd.read_csv(plain_csv).rename(columns={"params": " Params"}).assign(rerun=["FALSE", "TRUE"] * 15)
    path = tmp_path / "spelled.csv"
    df.to_csv(path, index=False)
    spelled = json.loads(run("fit", "surface", "--csv", path, "--params-col", " Params", "--where", "rerun=false",
                             "--format", "json").stdout)
    assert spelled["n_runs"] == 15
    exact = json.loads(run("fit", "surface", "--csv", path, "--params-col", "Params", "--where", "rerun=FALSE",
                           "--format", "json").stdout)
    assert exact["params"] == spelled["params"]
    targets = tmp_path / "targets.csv"
    pd.DataFrame({"params": [1e10, 2e10], "tokens": [2e11, 4e11], "loss": ["abc", 2.1]}).to_csv(targets, index=False)
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets, "--format", "json").stdout)
    [w] = [w for w in out["warnings"] if "targets' column 'loss'" in w]
    assert "holds 'abc', which is no loss (a positive number): it is not read as their actual loss" in w
    for cells, said in ((["2.1", "-1"], "holds '-1.0', which is no loss"), (["abc"], "holds 'abc', which is no loss"),
                        (["2.1", "inf"], "holds 'inf', which is no loss (a positive number): it is not read as their "
                                         "actual loss, so no error is shown")):
        pd.DataFrame({"params": [1e10] * len(cells), "tokens": [2e11] * len(cells), "loss": cells}).to_csv(
            targets, index=False)  # a negative loss, or a lone word: said, as the word among numbers is
        out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets, "--format", "json").stdout)
        assert [w for w in out["warnings"] if said in w], out["warnings"]
    pd.DataFrame({"params": [1e10], "tokens": [2e11], "loss": [2.1], "actual": [2.2]}).to_csv(targets, index=False)
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets, "--format", "json").stdout)
    assert "the targets' columns 'loss' and 'actual' both hold losses: 'loss' is read as their actual loss" in \
        " ".join(out["warnings"])
    pd.DataFrame({"params": [1e10], "tokens": [2e11], "loss": [-1.0], "actual": [2.2]}).to_csv(targets, index=False)
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets, "--format", "json").stdout)
    said = " ".join(out["warnings"])  # 'actual' is read: an error is shown, from it
    assert "holds '-1.0', which is no loss" in said and "no error is shown" not in said
    assert out["predictions"][0]["predicted_error"] == pytest.approx(out["predictions"][0]["median"] / 2.2 - 1)
    clean = pd.DataFrame({"params": [1e10], "tokens": [2e11], "loss": [2.1]})
    clean.to_csv(targets, index=False)
    assert not [w for w in json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets, "--format",
                                          "json").stdout)["warnings"] if "targets' column" in w]
    for args in (("fit", "surface"), ("fit", "endpoint"), ("backtest",)):
        one_error_line(run(*args, plain_csv), "unexpected extra argument", "give a CSV with --csv FILE")
    one_error_line(run("fit", "surface", "nothing"), "unexpected extra argument")
    assert "--csv FILE" not in run("fit", "surface", "nothing").output


def test_where_conditions_that_exclude_each_other_say_they_must_all_hold(tmp_path):
    both = tmp_path / "both.csv"
    pd.concat([pd.read_csv(surface_csv(tmp_path / "a.csv")).assign(dataset="web"),
               pd.read_csv(surface_csv(tmp_path / "b.csv")).assign(dataset="code")]).to_csv(both, index=False)
    res = run("fit", "surface", "--csv", both, "--where", "dataset=web", "--where", "dataset=code")
    assert res.exit_code == 2
    assert "no row has dataset = 'code'" in res.output and "--where dataset=web" in res.output
    assert "must all hold" in res.output


def test_a_csvs_options_without_a_csv_are_refused_not_ignored(tmp_path):
    store = tmp_path / "store"  # refused before any store is read
    for args, flag in ((["fit", "endpoint", "--loss-col", "x"], "--loss-col"), (["fit", "endpoint", "--compute-col", "c"], "--compute-col"),
                       (["fit", "surface", "--tokens-col", "d"], "--tokens-col"), (["fit", "curve", "--total-steps-col", "t"], "--total-steps-col"),
                       (["backtest", "--params-col", "n"], "--params-col")):
        one_error_line(run(*args, "--store", store), f"{flag} names a column of a CSV (--csv FILE)", "drop it")
    # and options of another law or form
    one_error_line(run("fit", "curve", "--store", store, "--shape", "C=2"), "--shape is only for the schedule-aware laws")
    one_error_line(run("backtest", "--store", store, "--every", "0.1"), "--every is only for --form curve")


def test_the_options_of_another_law_or_form_are_refused_not_ignored(endpoint_csv, plain_csv, curves_csv, tmp_path):
    store = tmp_path / "store"  # refused before any store is read
    for flag, value in (("--every", "0.1"), ("--compute", "fit"), ("--compute", "auto")):  # given, though the default
        one_error_line(run("fit", "curve", "--store", store, "--law", "multipower", flag, value),
                       f"{flag} is only for --law perfraction", "drop it")
    for csv, form, flag in ((endpoint_csv, "endpoint", "--fraction-col"), (plain_csv, "surface", "--fraction-col"),
                            (plain_csv, "surface", "--compute-col"), (curves_csv, "curve", "--params-col"),
                            (curves_csv, "curve", "--tokens-col"), (endpoint_csv, "endpoint", "--budget-col"),
                            (curves_csv, "curve", "--budget-col")):
        one_error_line(run("backtest", "--csv", csv, "--form", form, flag, "x"), f"{flag} is only for --form", "drop it")
    for where in (("--csv", plain_csv), ("--store", store)):  # the surface counts no compute, from either source
        one_error_line(run("backtest", *where, "--form", "surface", "--compute", "6nd"),
                       "--compute is only for --form endpoint or curve (the surface reads each run's N and D", "drop it")
    # an option of the form, named as its default is, is not taken for one of another
    for args in (("--form", "endpoint", "--csv", endpoint_csv, "--compute-col", "compute"),
                 ("--form", "surface", "--csv", plain_csv, "--params-col", "params", "--tokens-col", "tokens"),
                 ("--form", "curve", "--csv", curves_csv, "--total-steps-col", "total_steps", "--compute-col", "compute")):
        assert run("backtest", *args).exit_code == 0, args


def test_a_column_the_user_names_and_the_csv_lacks_is_refused_not_passed_over(tmp_path):
    """--params-col and --tokens-col name columns the endpoint law reads where the CSV has them: one named
    on the command line that the file lacks is a typo, refused as --budget-col's is, not a plain ladder."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_fits_isoflop import sweep

    C, N, D, y = sweep(budgets_=(1e18, 1e19, 1e20), seed=1)
    path = tmp_path / "sweep.csv"
    pd.DataFrame({"N": N, "tokens": D, "budget": C, "loss": y}).to_csv(path, index=False)
    for command in (("fit", "endpoint"), ("backtest",)):
        one_error_line(run(*command, "--csv", path, "--compute-col", "budget", "--params-col", "n"),
                       "no column 'n' (for --params-col)", "did you mean 'N'?")
        one_error_line(run(*command, "--csv", path, "--compute-col", "budget", "--tokens-col", "d"),
                       "no column 'd' (for --tokens-col)")
    named = json.loads(run("fit", "endpoint", "--csv", path, "--compute-col", "budget", "--params-col", "N",
                           "--format", "json").stdout)
    assert [b["runs"] for b in named["budgets"]] == [9] * 3
    # unnamed, the default column the file lacks is passed over, as before: every run is fitted, with a note
    bare = json.loads(run("fit", "endpoint", "--csv", path, "--compute-col", "budget", "--format", "json").stdout)
    assert bare["n_runs"] == 27 and "budgets" not in bare
    assert any("27 runs share a compute budget" in n for n in bare["notes"])


def test_the_store_options_with_a_csv_name_the_columns_the_command_reads(plain_csv, endpoint_csv, tmp_path):
    # the surface reads N and D: its refusal names their columns, and says nothing of compute, an axis it has not
    for flag, value in (("--group", "x"), ("--metric", "m"), ("--role", "hero"), ("--store", tmp_path / "s")):
        for command in (("fit", "surface"), ("backtest", "--form", "surface")):
            res = run(*command, "--csv", plain_csv, flag, value)
            one_error_line(res, f"{flag} only means something for the store's runs (which runs)",
                           "give its parameter counts and tokens as columns (--params-col, --tokens-col)")
            assert "compute" not in res.output, res.output
    # the laws in compute name its column
    for command in (("fit", "endpoint"), ("backtest", "--form", "endpoint")):
        one_error_line(run(*command, "--csv", endpoint_csv, "--group", "x"),
                       "(which runs, and how their compute is counted)", "give its compute as a column (--compute-col)")


def test_backtest_level_is_the_level_of_the_band_it_scores(endpoint_csv):
    from typer.main import get_command

    [level] = [p for p in get_command(app).commands["backtest"].params if p.name == "level"]
    assert "scored" in level.help and "bootstrap intervals" not in level.help
    # with or without --bootstrap
    for boot in ("0", "30"):
        half, most = (json.loads(run("backtest", "--csv", endpoint_csv, "--level", lv, "--bootstrap", boot, "--format",
                                     "json").stdout) for lv in ("0.5", "0.9"))
        assert (half["level"], most["level"]) == (0.5, 0.9)
        for h, m in zip(half["rows"], most["rows"]):
            assert m["lo"] < h["lo"] < h["hi"] < m["hi"]


def test_a_curve_csvs_checkpoints_agree_with_their_plan(curves_csv, tmp_path):
    table = pd.read_csv(curves_csv)

    def written(frame: pd.DataFrame) -> Path:
        frame.to_csv(tmp_path / "c.csv", index=False)
        return tmp_path / "c.csv"

    def fitted(path: Path):
        return run("fit", "curve", "--csv", path, "--total-steps-col", "total_steps", "--every", "0.1")

    assert fitted(written(table)).exit_code == 0
    past = pd.concat([table, table.iloc[[9]].assign(step=5000)])  # run r0 at step 5,000 of 1,000
    one_error_line(fitted(written(past)), "line 52: run 'r0' at step 5,000, 5× its planned steps")
    # a final checkpoint a little past the plan (step 1,020 of 1,000) is read, as a fit of finals and an import read it
    late = fitted(written(table.assign(step=table["step"].where(table["step"] != 1000, 1020))))
    assert late.exit_code == 0 and "past their runs' planned steps, up to 1.02× (run 'r0', line " in " ".join(late.output.split()), late.output
    other_total = table.copy()
    other_total.loc[3, "total_steps"] = 777
    one_error_line(fitted(written(other_total)), "lines 2 and 5: run 'r0' has 'total_steps' 1000 and 777")
    twice = pd.concat([table, table.iloc[[2]].assign(loss=9.9)])
    one_error_line(fitted(written(twice)), "lines 4 and 52: run 'r0' has two losses at step 300")
    percent = table.assign(pct=table["step"] / 10)  # 10, 20, ... 100
    one_error_line(run("fit", "curve", "--csv", written(percent), "--fraction-col", "pct", "--every", "0.1"),
                   "line 2: run 'r0' at fraction 10 of its planned steps, past 1; the column looks like percent: give "
                   "fractions (0.5 for half way)")


def test_holding_out_too_many_says_how_many_runs_were_left(endpoint_csv):
    one_error_line(run("backtest", "--csv", endpoint_csv, "--holdout", "1,6"),
                   "holding out the 6 largest leaves 2 runs to fit", "hold out fewer")


def test_chinchillas_runs_that_epoch_left_out_are_named_off_the_law(shared_data):
    """The Epoch refit left out five runs of under 0.5 tokens per parameter; the default fit that keeps them names
    those five and no other."""
    csv = shared_data / "chinchilla_epoch" / "chinchilla_epoch_tidy.csv"
    res = run("fit", "surface", "--csv", csv, "--format", "json")
    assert res.exit_code == 0, res.output
    [warning] = [w for w in json.loads(res.stdout)["warnings"] if "off the fitted law" in w]
    assert warning.startswith("the run 'chinchilla_fig4_001' at N = 2.98e+09, D = 5.16e+08") and "more)" not in warning
    from fits.checks import far_off
    from fits.surfacechoice import choose_surface

    table = pd.read_csv(csv)
    fit = choose_surface(table["params"], table["tokens"], table["loss"]).fit
    far = far_off(table["loss"], fit.predict(table["params"], table["tokens"]))
    assert far.tolist() == np.flatnonzero(table["excluded_in_epoch_fit"]).tolist()
    for _, run_ in table[table["excluded_in_epoch_fit"].astype(bool)].iterrows():  # each of the five, by N and D
        assert f"{run_['run_id']!r} at N = {run_['params']:.3g}, D = {run_['tokens']:.3g}" in warning
    said = run("fit", "surface", "--csv", csv)  # as a table: the fit's own warnings on stderr, as every other
    assert said.exit_code == 0 and "warning" not in said.stdout and "E =" in said.stdout
    assert "warning: the run 'chinchilla_fig4_001'" in said.stderr and "off the fitted law" in said.stderr


def test_no_numerical_warning_reaches_the_terminal(plain_csv, tmp_path):
    rows = plain_csv.read_text().splitlines()
    rows[3] = ",".join(rows[3].split(",")[:2] + ["1e300"])  # a loss no float squares
    (tmp_path / "huge.csv").write_text("\n".join(rows) + "\n")
    done = subprocess.run([sys.executable, "-m", "ladder.entry", "fit", "surface", "--csv", str(tmp_path / "huge.csv")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())  # as the terminal wrapped it; the fit's warnings on stderr
    assert "RuntimeWarning" not in done.stdout + said and "e+299× the fitted law" in said


def test_endpoint_targets_empty_absurd_or_below_the_runs_are_refused_or_noted(endpoint_csv, tmp_path):
    for at in ("", "1e22,,1e23"):
        one_error_line(run("fit", "endpoint", "--csv", endpoint_csv, "--at", at), "an empty value")
    one_error_line(run("fit", "endpoint", "--csv", endpoint_csv, "--at", "1e300"), "--at=1e+300 is too large: at most 1e+40")
    res = run("fit", "endpoint", "--csv", endpoint_csv, "--at", "1e10,1e22", "--format", "json")
    assert res.exit_code == 0, res.output
    [note] = [n for n in json.loads(res.stdout)["warnings"] if "below the fitted runs" in n]
    assert note.startswith("the target at C = 1e+10 lies below the fitted runs (the smallest 1e+18)")
    notes = json.loads(run("fit", "endpoint", "--csv", endpoint_csv, "--at", "1e22,1e30", "--format", "json").stdout)["warnings"]
    assert [n for n in notes if "beyond the fitted runs" in n][0].startswith("the target at C = 1e+30 lies ")
    said = " ".join(run("fit", "endpoint", "--csv", endpoint_csv, "--at", "1e30").stderr.split())
    assert "warning: the target at C = 1e+30 lies " in said
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    one_error_line(run("plan", tmp_path / "empty.yaml"), "the file is empty (or only comments)")


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="a Linux file that opens and will not be read")
def test_a_file_that_will_not_be_read_is_named(tmp_path):
    for args in (["fit", "endpoint", "--csv", "/proc/self/mem"], ["plan", "/proc/self/mem"]):
        one_error_line(run(*args), "/proc/self/mem: cannot read it (")


def test_fit_surface_backtests_a_sweep_by_its_budget_column(tmp_path):
    """A CSV with a budget column is an isoFLOP sweep: the form is chosen by predicting its largest budget, and
    E + (A/N^α + B/D^β)^γ is among the forms; a table without one, by the budgets its tokens trace."""
    from tests.test_fits_surface_kaplan import KAPLAN, sweep

    N, D, y, budget, Nt, Dt, yt = sweep(KAPLAN, seed=0)
    runs, targets = tmp_path / "sweep.csv", tmp_path / "targets.csv"
    pd.DataFrame({"params": N, "tokens": D, "budget": budget, "loss": y}).to_csv(runs, index=False)
    pd.DataFrame({"params": Nt, "tokens": Dt}).to_csv(targets, index=False)
    res = run("fit", "surface", "--csv", runs, "--predict-csv", targets, "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    choice = out["form_choice"]
    assert choice["form"] == "kaplan" and "largest budget" in choice["why"] and "other forms' predictions" in choice["why"]
    assert {r["form"] for r in choice["backtest"]} == {"free", "shared", "kaplan"}
    assert all(r["held_out_budgets"] for r in choice["backtest"])
    assert out["params"]["gamma"] == pytest.approx(KAPLAN["gamma"], abs=0.05)
    np.testing.assert_allclose([p["median"] for p in out["predictions"]], yt, rtol=0.005)
    # the compute-optimal run at each target's compute: its size and tokens, and the least loss with its band
    opt = json.loads(run("fit", "surface", "--csv", runs, "--optimum-at", "1e20,3e20", "--format", "json").stdout)
    got = opt["optima"]
    assert [o["compute"] for o in got] == [1e20, 3e20] and opt["predictions"] == []
    twice = json.loads(run("fit", "surface", "--csv", runs, "--optimum-at", "1e20", "--optimum-at", "3e20", "--format",
                           "json").stdout)["optima"]
    assert twice == got  # given twice: both (the last one alone, unsaid, before)
    np.testing.assert_allclose([o["params"] for o in got], Nt, rtol=0.05)
    np.testing.assert_allclose([6 * o["params"] * o["tokens"] for o in got], [1e20, 3e20], rtol=1e-9)
    np.testing.assert_allclose([o["median"] for o in got], yt, rtol=0.005)
    assert all(o["lo90"] <= y <= o["hi90"] for o, y in zip(got, yt))
    # an optimum is a target like any other: its band is the one --at gives at its N and D
    at = json.loads(run("fit", "surface", "--csv", runs, "--format", "json", "--at",
                        f"{got[0]['params']!r},{got[0]['tokens']!r}").stdout)["predictions"][0]
    assert {k: at[k] for k in ("median", "lo50", "hi50", "lo90", "hi90")} == \
        {k: got[0][k] for k in ("median", "lo50", "hi50", "lo90", "hi90")}
    shown = run("fit", "surface", "--csv", runs, "--optimum-at", "1e20").stdout
    assert "optimum at C = 1e+20 FLOPs: N* = " in shown and "tokens per parameter" in shown
    one_error_line(run("fit", "surface", "--csv", runs, "--optimum-at", "1e41"), "--optimum-at", "at most 1e+40")
    # a compute too small for any model (a typo for 1e23, say) is said to be the compute, not the fit
    one_error_line(run("fit", "surface", "--csv", runs, "--optimum-at", "1"), "--optimum-at 1: too little compute for "
                   "any model", "give the compute in FLOPs")
    text = run("fit", "surface", "--csv", runs).stdout
    assert "Kaplan-Chinchilla surface" in text and "gamma = " in text and "holding out budget = " in text
    assert "budgets (given): 1e+18 (9 runs of 9 sizes)" in text
    # `ladder backtest` holds out the sweep's largest budget (nine runs), as `fit surface` chooses its form
    bt = json.loads(run("backtest", "--form", "surface", "--csv", runs, "--format", "json").stdout)
    assert len(bt["rows"]) == 9 and "kaplan without the largest budget" in " ".join(bt["notes"])
    assert bt["mean_abs_error"] < 0.005 and bt["coverage"] == 1.0
    # the same runs without the column, or under another name not given: the budgets their tokens trace, said
    pd.DataFrame({"params": N, "tokens": D, "flops": budget, "loss": y}).to_csv(runs, index=False)
    plain = json.loads(run("fit", "surface", "--csv", runs, "--format", "json").stdout)["form_choice"]
    assert plain["form"] == "kaplan" and "isoFLOP sweep of 5 budgets that their tokens trace" in plain["why"]
    assert plain["budgets"]["traced"] and not choice["budgets"]["traced"]
    assert [b["runs"] for b in plain["budgets"]["budgets"]] == [b["runs"] for b in choice["budgets"]["budgets"]] == [9] * 5
    assert [r["mean_error"] for r in plain["backtest"]] == [r["mean_error"] for r in choice["backtest"]]
    traced = json.loads(run("backtest", "--form", "surface", "--csv", runs, "--format", "json").stdout)
    assert len(traced["rows"]) == 9 and any("their tokens trace" in n for n in traced["notes"])
    named = json.loads(run("fit", "surface", "--csv", runs, "--budget-col", "flops", "--format", "json").stdout)
    assert named["form_choice"]["form"] == "kaplan"
    one_error_line(run("fit", "surface", "--csv", runs, "--budget-col", "budgets"), "no column 'budgets'")
    one_error_line(run("fit", "surface", "--budget-col", "flops"), "--budget-col names a column of a CSV")
    one_error_line(run("fit", "surface", "--csv", runs, "--form", "kaplan", "--shared-exponent"),
                   "--shared-exponent and --form kaplan contradict each other")


def test_a_surface_with_an_exponent_at_0_has_no_optimum_and_says_so(plain_csv, tmp_path):
    rising = pd.read_csv(plain_csv).assign(loss=lambda t: 1 - 0.5 / t["params"] ** 0.1)  # an accuracy, not a loss
    rising.to_csv(tmp_path / "acc.csv", index=False)
    for args in ((), ("--format", "json")):
        one_error_line(run("fit", "surface", "--csv", tmp_path / "acc.csv", "--optimum-at", "1e22", *args),
                       "--optimum-at 1e+22: the fitted surface has no least loss at a sensible size",
                       "an exponent sits near 0")


def test_losses_beyond_a_floats_square_are_a_usage_error(plain_csv, tmp_path):
    pd.read_csv(plain_csv).assign(loss=lambda t: t["loss"] * 1e200).to_csv(tmp_path / "big.csv", index=False)
    one_error_line(run("fit", "surface", "--csv", tmp_path / "big.csv"), "no grid point gives a finite surface fit")


def test_level_or_seed_without_bootstrap_is_refused_as_it_would_be_ignored(plain_csv, targets_csv, endpoint_csv):
    # predictions give 50% and 90% bands on every route; --level sets the parameters' bootstrap intervals only
    for args in (("surface", "--csv", plain_csv, "--predict-csv", targets_csv), ("surface", "--csv", plain_csv, "--at",
                 "7e10,1.4e12"), ("endpoint", "--csv", endpoint_csv, "--at", "1e22")):
        one_error_line(run("fit", *args, "--level", "0.8"), "--level 0.8: sets the level of the parameters' bootstrap "
                       "intervals; add --bootstrap N")
        one_error_line(run("fit", *args, "--seed", "3"), "--seed 3: seeds the bootstrap's resampling, and no "
                       "bootstrap is asked for; add --bootstrap N")
    out = json.loads(run("fit", "endpoint", "--csv", endpoint_csv, "--at", "1e22", "--level", "0.8", "--bootstrap",
                         "30", "--format", "json").stdout)
    assert out["bootstrap"]["level"] == 0.8 and set(out["predictions"][0]) >= {"median", "lo50", "hi50", "lo90", "hi90"}


def test_at_and_predict_csv_give_one_prediction_of_the_same_point(plain_csv, tmp_path):
    pd.DataFrame({"params": [7e10], "tokens": [1.4e12]}).to_csv(tmp_path / "t.csv", index=False)
    for boot in ((), ("--bootstrap", "30")):
        by_csv = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", tmp_path / "t.csv", *boot,
                                "--format", "json").stdout)["predictions"]
        by_at = json.loads(run("fit", "surface", "--csv", plain_csv, "--at", "7e10,1.4e12", *boot,
                               "--format", "json").stdout)["predictions"]
        assert by_at == by_csv and by_at[0]["lo90"] < by_at[0]["median"] < by_at[0]["hi90"]


def test_a_quote_never_closed_is_named_as_such(plain_csv, tmp_path):
    rows = plain_csv.read_text().splitlines()
    rows[4] = '"' + rows[4]
    (tmp_path / "q.csv").write_text("\n".join(rows) + "\n")
    one_error_line(run("fit", "surface", "--csv", tmp_path / "q.csv"),
                   "q.csv: line 5: a quoted value opened here is never closed", "add its closing quote")


def test_a_table_of_checkpoints_without_a_run_column_is_named(tmp_path):
    N = np.repeat(np.geomspace(5e7, 5e9, 4), 40)
    D = N * np.tile(np.geomspace(0.5, 40, 40), 4)  # forty checkpoints of one run per size
    pd.DataFrame({"params": N, "tokens": D, "loss": [truth(n, d) for n, d in zip(N, D)]}).to_csv(
        tmp_path / "ckpt.csv", index=False)
    res = run("fit", "surface", "--csv", tmp_path / "ckpt.csv", "--format", "json")
    assert res.exit_code == 0, res.output
    [note] = [n for n in json.loads(res.stdout)["notes"] if "rows have params" in n]
    assert note.startswith("40 rows have params = ") and "--run-col, --step-col" in note
    assert not [n for n in json.loads(run("fit", "surface", "--csv", surface_csv(tmp_path / "runs.csv"), "--format",
                                          "json").stdout)["notes"] if "rows have params" in n]


def test_optimum_at_says_when_the_tables_budgets_are_not_6nd(tmp_path):
    path = surface_csv(tmp_path / "runs.csv")
    table = pd.read_csv(path)
    table.assign(budget=6 * table["params"] * table["tokens"] / 3).to_csv(path, index=False)  # a third of 6·N·D
    warnings = json.loads(run("fit", "surface", "--csv", path, "--optimum-at", "1e21", "--format", "json").stdout)["warnings"]
    assert any(w.startswith("the table's budgets are 0.333× 6·N·D") and "--optimum-at B/0.333" in w for w in warnings)
    table.assign(budget=6 * table["params"] * table["tokens"]).to_csv(path, index=False)
    warnings = json.loads(run("fit", "surface", "--csv", path, "--optimum-at", "1e21", "--format", "json").stdout)["warnings"]
    assert not any("budgets are" in w for w in warnings)


def test_targets_keep_the_plain_column_names_when_the_runs_name_theirs(plain_csv, targets_csv, tmp_path):
    pd.read_csv(plain_csv).rename(columns={"params": "params_nonembed"}).to_csv(tmp_path / "ne.csv", index=False)
    res = run("fit", "surface", "--csv", tmp_path / "ne.csv", "--params-col", "params_nonembed",
              "--predict-csv", targets_csv, "--format", "json")
    assert res.exit_code == 0, res.output
    want = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets_csv, "--format", "json").stdout)
    assert json.loads(res.stdout)["predictions"] == want["predictions"]


def test_parameters_in_billions_are_named(plain_csv, tmp_path):
    pd.read_csv(plain_csv).assign(params=lambda t: t["params"] / 1e9).to_csv(tmp_path / "b.csv", index=False)
    warnings = json.loads(run("fit", "surface", "--csv", tmp_path / "b.csv", "--format", "json").stdout)["warnings"]
    assert any(w.startswith("the runs give N as small as 0.05: parameters and tokens are counts") for w in warnings)
    assert not any("are counts" in w for w in json.loads(run("fit", "surface", "--csv", plain_csv, "--format",
                                                              "json").stdout)["warnings"])


def test_targets_as_counts_beside_runs_in_billions_are_refused_before_any_fit(plain_csv, targets_csv, tmp_path):
    pd.read_csv(plain_csv).assign(params=lambda t: t["params"] / 1e9).to_csv(tmp_path / "b.csv", index=False)
    for how in (("--predict-csv", targets_csv), ("--at", "7e9,1.4e11")):
        res = run("fit", "surface", "--csv", tmp_path / "b.csv", *how)
        assert res.exit_code == 2 and "the runs give N as small as 0.05" in res.output, res.output
        assert "targets' as counts; give both as counts" in res.output and "Traceback" not in res.output
    res = run("fit", "surface", "--csv", tmp_path / "b.csv", "--at", "7,140", "--format", "json")  # both in billions
    assert res.exit_code == 0, res.output


def test_a_csv_saved_by_a_spreadsheet_fits_as_the_clean_one(endpoint_csv, tmp_path):
    lines = endpoint_csv.read_text().splitlines()
    saved = tmp_path / "saved.csv"  # a comma at the end of every line, and rows of bare commas at the end
    saved.write_text("".join(f"{line},\r\n" for line in lines) + ",,,,\r\n,,,,\r\n")
    clean, spread = (json.loads(run("fit", "endpoint", "--csv", p, "--format", "json", "--at", "1e22").stdout)
                     for p in (endpoint_csv, saved))
    assert spread["n_runs"] == 8 and spread["params"] == clean["params"]
    assert spread["predictions"] == clean["predictions"]
    valued = tmp_path / "valued.csv"  # a value under the unnamed column is not silently dropped
    valued.write_text("".join(f"{line},\n" for line in lines[:3]) + f"{lines[3]},7\n")
    res = run("fit", "endpoint", "--csv", valued, "--at", "1e22")
    assert res.exit_code == 2 and "line 4: the value '7' is in a column with no name" in res.output


def test_a_csv_saved_with_semicolons_and_decimal_commas_or_with_tabs_fits_as_the_comma_one(endpoint_csv, tmp_path):
    table = pd.read_csv(endpoint_csv)
    semicolons, tabs = tmp_path / "semicolons.csv", tmp_path / "tabs.tsv"
    table.to_csv(semicolons, sep=";", decimal=",", index=False)
    table.to_csv(tabs, sep="\t", index=False)
    assert "," in semicolons.read_text().splitlines()[1]  # a decimal comma in the file
    clean, *others = (json.loads(run("fit", "endpoint", "--csv", p, "--format", "json", "--at", "1e22").stdout)
                      for p in (endpoint_csv, semicolons, tabs))
    for other in others:
        assert other["n_runs"] == 8 and other["params"] == pytest.approx(clean["params"], rel=1e-12)


def test_a_band_without_spare_runs_has_no_edges_and_a_huge_edge_prints_in_digits(tmp_path):
    three = tmp_path / "three.csv"
    three.write_text("compute,loss\n1e18,3.0\n1e19,2.7\n1e20,2.5\n")  # as many runs as parameters: no dof
    res = run("fit", "endpoint", "--csv", three, "--at", "1e23", "--format", "json")
    (p,) = json.loads(res.stdout)["predictions"]
    assert p["median"] > 0 and all(p[k] is None for k in ("lo50", "hi50", "lo90", "hi90"))  # not [0, null]
    res = run("fit", "endpoint", "--csv", three, "--at", "1e23")
    assert "50% unbounded  90% unbounded" in res.stdout
    typo = tmp_path / "typo.csv"
    typo.write_text("compute,loss\n1e18,3.0\n1e19,2.7\n1e20,2.5\n1e21,2.35\n1e22,1e-9\n")  # a loss typed wrong
    said = " ".join(run("fit", "endpoint", "--csv", typo, "--at", "1e23").stdout.split())
    assert "e+" in said.split("90% [")[1].split("]")[0] and len(said.split("90% [")[1].split("]")[0]) < 30


def test_a_ladder_of_tiny_runs_in_the_store_is_not_told_its_compute_is_in_other_units(tmp_path):
    """The store's computes are counted (FLOPs per token × tokens, or 6·N·D): tiny runs the tool trained itself
    are small, not in GFLOPs. The same numbers given as a CSV's compute column are still questioned."""
    table = tmp_path / "finals.csv"
    sizes = (2e3, 4e3, 8e3, 1.6e4, 3.2e4)
    table.write_text("run_id,params,tokens,loss\n" + "\n".join(
        f"r{i},{n:g},{20 * n:g},{2.0 + 40 * (120 * n * n) ** -0.2:.5f}" for i, n in enumerate(sizes)))
    res = run("import", "csv", table, "--store", tmp_path / "s", "--run", "run_id", "--tokens", "tokens",
              "--metric", "eval/loss=loss", "--coord-column", "active_params=params", "--coord", "role=rung")
    assert res.exit_code == 0, res.output
    res = run("fit", "endpoint", "--store", tmp_path / "s", "--format", "json")
    assert res.exit_code == 0, res.output
    assert not [w for w in json.loads(res.stdout)["warnings"] if "GFLOPs" in w]
    given = tmp_path / "given.csv"
    given.write_text("compute,loss\n" + "\n".join(f"{120 * n * n:g},{2.0 + 40 * (120 * n * n) ** -0.2:.5f}"
                                                  for n in sizes))
    res = run("fit", "endpoint", "--csv", given, "--format", "json")
    assert res.exit_code == 0, res.output
    assert [w for w in json.loads(res.stdout)["warnings"] if "in GFLOPs, multiply by 1e9" in w]


def test_a_missing_compute_column_names_the_one_that_holds_it(tmp_path):
    """Epoch's Chinchilla table names its compute "flops": `fit endpoint` said there was no column 'compute' and
    named no flag."""
    path = tmp_path / "runs.csv"
    pd.DataFrame({"run": ["a", "b", "c"], "flops": [1e18, 1e19, 1e20], "loss": [3.0, 2.8, 2.6]}).to_csv(path, index=False)
    one_error_line(run("fit", "endpoint", "--csv", path), "no column 'compute' (for --compute-col); the file has run, "
                   "flops, loss; give --compute-col flops")
    res = run("fit", "endpoint", "--csv", path, "--compute-col", "flops", "--run-col", "run")
    assert res.exit_code == 0, res.output


def test_far_targets_are_said_each_its_own_way_not_grouped_under_the_first_ones(plain_csv, tmp_path):
    """"the target at N = 5e+12 ... (and 2 more) lies 8.9 e-folds off the fitted runs' token ratios" said the other two
    lay off the ratios too, where one lay far in size at a ratio the runs hold."""
    targets = tmp_path / "far.csv"
    targets.write_text("params,tokens\n7,1.4e11\n7e15,1.4e17\n7e14,1.4e16\n")
    out = json.loads(run("fit", "surface", "--csv", plain_csv, "--predict-csv", targets, "--format", "json").stdout)
    (far,) = [w for w in out["warnings"] if "e-folds" in w and "no ladder tests a law that far" in w]
    assert far.startswith("the target at N = 7, D = 1.4e+11 lies ") and "off the fitted runs' token ratios" in far
    assert "(2 more targets lie more than 7 e-folds outside the runs, each in its efolds_out)" in far
    assert "(and 2 more)" not in far
