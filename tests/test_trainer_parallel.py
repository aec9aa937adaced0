"""The same run on one device, on 8 fake CPU devices with expert parallelism, and on two processes
that form one mesh: the losses agree. Each layout runs in a subprocess because the device count is
fixed when jax starts (XLA_FLAGS must be set before the import)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

SETUP = textwrap.dedent("""
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count={devices}"
    from pathlib import Path
    from ladder import load_recipe
    from ladder.config.plan import override, plan

    def tiny(run_dir, steps_tpp):
        recipe = override(load_recipe("micro-cpu"), widths=[32], depths=[2], seq_len=32, sets=[
            f"tpp={{steps_tpp}}", "batch_sequences=8", "step_multiple=1", "data.eval_sequences=8", "logging.wandb=disabled",
            "logging.peak_flops=1e11", "checkpoint.every_steps=100", "eval_every_fraction=0.25"])
        return plan(recipe).rungs[0].replace(run_dir=str(run_dir))
""")


def run_script(body: str, devices: int, tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    script = tmp_path / f"script_{abs(hash(body))}.py"
    script.write_text(SETUP.format(devices=devices) + textwrap.dedent(body))
    return subprocess.Popen([sys.executable, str(script), *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def result_of(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


EIGHT_DEVICES = """
    import jax
    from ladder.errors import LadderError
    from trainer_jax import make_mesh, train

    out = {"devices": jax.device_count()}
    tmp = Path(sys.argv[1])
    cfg = tiny(tmp / "one", 0.345)  # 20 steps
    for name, ep, devs in (("one", None, jax.devices()[:1]), ("ep8", 8, None), ("dp2_ep4", 4, None)):
        r = train(cfg.replace(run_dir=str(tmp / name)), expert_parallel=ep, devices=devs, progress=False)
        out[name] = {"train": list(r.train_losses), "eval": r.eval_loss, "dropless": r.eval_dropless_loss}
    for label, call in (("batch", lambda: make_mesh(cfg.spec, 12)), ("experts", lambda: make_mesh(cfg.spec, 8, 3))):
        try:
            call()
        except LadderError as exc:
            out["error_" + label] = str(exc)
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def eight_devices(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("eight")
    return result_of(run_script(EIGHT_DEVICES, 8, tmp, str(tmp)))


@pytest.mark.slow
def test_one_device_and_eight_devices_give_the_same_losses(eight_devices):
    out = eight_devices
    assert out["devices"] == 8
    one = out["one"]
    assert len(one["train"]) == 20
    for layout in ("ep8", "dp2_ep4"):
        np.testing.assert_allclose(out[layout]["train"], one["train"], atol=1e-4, rtol=0)
        assert abs(out[layout]["eval"] - one["eval"]) < 1e-4
        assert abs(out[layout]["dropless"] - one["dropless"]) < 1e-4
    assert one["train"][-1] < one["train"][0] - 1.0  # it trained
    assert out["error_batch"] == "batch_size=12 is not divisible by the 8 devices the batch is split over: use a multiple of 8"
    assert out["error_experts"].startswith("expert parallelism 3 must be positive and divide the 8 devices")


TWO_PROCESSES = """
    import jax
    from trainer_jax import init_distributed, train

    init_distributed(sys.argv[2], 2, int(sys.argv[3]))  # before anything touches the devices
    r = train(tiny(Path(sys.argv[1]) / "two", 0.345), expert_parallel=2, progress=False)  # 20 steps
    print(json.dumps({"processes": jax.process_count(), "devices": jax.device_count(),
                      "local": jax.local_device_count(), "train": list(r.train_losses), "eval": r.eval_loss}))
"""


@pytest.mark.slow
def test_two_processes_form_one_mesh_and_train(tmp_path, eight_devices):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    procs = [run_script(TWO_PROCESSES, 2, tmp_path, str(tmp_path), address, str(i)) for i in range(2)]
    reference = eight_devices["one"]  # the same config on one device
    for r in [result_of(p) for p in procs]:
        assert (r["processes"], r["devices"], r["local"]) == (2, 4, 2)
        np.testing.assert_allclose(r["train"], reference["train"], atol=1e-4, rtol=0)
        assert abs(r["eval"] - reference["eval"]) < 1e-4
    run_dir = tmp_path / "two"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "finished"
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
             if "train/loss" in line]
    assert steps == list(range(1, 21))  # written once, by process 0


@pytest.mark.parametrize("address, env, message", [
    ("nohostcolon", {}, "--coordinator 'nohostcolon': expected host:port"),
    (":8476", {}, "--coordinator ':8476': expected host:port"),
    ("host:abc", {}, "--coordinator 'host:abc': port 'abc' must be a number from 1 to 65535"),
    ("host:70000", {}, "--coordinator 'host:70000': port '70000' must be a number from 1 to 65535"),
    (None, {"JAX_COORDINATOR_ADDRESS": "host"}, "JAX_COORDINATOR_ADDRESS 'host': expected host:port"),
    ("host:1234", {"JAX_PROCESS_ID": "first"}, "JAX_PROCESS_ID='first' must be an integer"),
])
def test_a_bad_coordinator_is_a_user_error_before_jax_is_asked(monkeypatch, address, env, message):
    from ladder.errors import LadderError
    from trainer_jax.mesh import init_distributed

    for key in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(LadderError) as caught:
        init_distributed(address, 2, -1 if "JAX_PROCESS_ID" in env else 0)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("address, processes, process_id, message", [
    (None, 0, 3, "--process-id 3 is for a multi-process run, and this one has 1 process: give --num-processes N (2 or "
                 "more), or leave it out to train as one process"),
    ("host:1234", 0, 0, "--coordinator host:1234 is for a multi-process run, and this one has 1 process"),
    ("host:1234", 1, 1, "--process-id 1 and --coordinator host:1234 are for a multi-process run, and this one has 1 "
                        "process: give --num-processes N (2 or more), or leave them out"),
])
def test_a_multi_process_flag_without_the_process_count_is_refused_not_passed_over(monkeypatch, address, processes,
                                                                                   process_id, message):
    from ladder.errors import LadderError
    from trainer_jax.mesh import init_distributed

    for key in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(LadderError) as caught:
        init_distributed(address, processes, process_id)
    assert str(caught.value).startswith(message)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "host:1234")  # set for every job on a cluster: one process is fine
    init_distributed(None, 0, -1)
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS")
    init_distributed(None, 0, -1)  # one process, no flag: nothing to join
    init_distributed(None, 0, 0)  # process 0 of one
