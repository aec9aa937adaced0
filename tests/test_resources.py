"""What a run asks of a cluster: every amount is a finite number >= 0, whichever way it is given."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ladder.cli import app
from ladder.config.plan import plan
from ladder.config.recipe import load_recipe
from ladder.config.runconfig import ResourcesConfig, RunConfig
from ladder.errors import LadderError

NON_FINITE = ["nan", "NaN", "inf", "-inf", "1e999"]


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("flag, field", [("--gpus-per-run", "gpus"), ("--cpus-per-run", "cpus"),
                                         ("--resource-per-run", "custom.TPU")])
def test_a_non_finite_amount_on_the_command_line_is_one_line_and_writes_nothing(tmp_path, flag, field, value):
    arg = f"TPU={value}" if flag == "--resource-per-run" else value
    res = CliRunner().invoke(app, ["plan", "micro-cpu", "--out", str(tmp_path), f"{flag}={arg}"])
    assert res.exit_code == 2, res.output
    shown = str(float(value))  # nan, inf or -inf, as the message prints the number
    what = {"--gpus-per-run": "GPUs", "--cpus-per-run": "CPU cores"}.get(flag)  # named by the flag given
    assert res.output == (f"error: {flag} {shown}: give 0 to 65,536 {what}\n" if what else
                          f"error: resources.{field}={shown} must be a finite number >= 0\n")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("field", ["cpus", "gpus", "custom"])
def test_a_non_finite_amount_is_refused_however_the_config_is_built(field, value):
    kwargs = {"custom": {"TPU": value}} if field == "custom" else {field: value}
    name = "custom.TPU" if field == "custom" else field
    with pytest.raises(LadderError, match=rf"^resources\.{name}={value} must be a finite number >= 0$"):
        ResourcesConfig(**kwargs)


@pytest.mark.parametrize("text", [".nan", ".inf", "-.inf", "nan", "1e999"])
def test_a_non_finite_amount_in_a_run_config_file_names_the_field_and_line(tmp_path, text):
    path = plan(load_recipe("micro-cpu")).rungs[0].save(tmp_path / "rung.yaml")
    assert "\n  gpus: 0.0\n" in path.read_text()
    path.write_text(path.read_text().replace("  gpus: 0.0\n", f"  gpus: {text}\n"))
    with pytest.raises(LadderError, match=r"resources\.gpus: .* is not a finite number \(line \d+\)"):
        RunConfig.load(path)
