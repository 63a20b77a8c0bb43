"""The real CLI against a fake OpenAI-compatible endpoint on 127.0.0.1 in every fault mode.

A failing model never looks like a result: `verifirst run` and `verifirst calibrate`, each in
every fault mode, stop with exit 1 and one line saying why (the first requests all failed),
print no traceback, register no prompt and cache no bad reply (the endpoint, once fixed, is
asked again and the items get verdicts); every request is counted, retries too, also on a flaky
endpoint; a hanging endpoint costs at most the request timeout per attempt.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import mlflow
import pytest
from typer.testing import CliRunner

from _fake_endpoint import FakeEndpoint
from conftest import experiment_toml
from verifirst.loop import evaluation as ev
from verifirst import lm as vlm
from verifirst.cli import app
from verifirst.lm import USAGE

REPO = Path(__file__).resolve().parents[1]
FAULTS = ("500", "429", "hang", "malformed", "empty", "truncated", "wrongschema")
TIMEOUT_S = 1.0
HANG_S = 8.0  # far longer than the timeout: every request times out
MAX_REQUESTS = 12  # the early stop: 5 requests all failed -> at most one more item's attempts in flight


@pytest.fixture(scope="module")
def fake():
    with FakeEndpoint("ok", hang_s=HANG_S, lifetime_s=600) as f:
        yield f


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One workdir for the module: one MLflow store to create."""
    return tmp_path_factory.mktemp("fault-endpoint") / "wd"


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    """The waits between attempts are not what is under test; the request timeout is."""
    monkeypatch.setattr(ev, "_sleep", lambda s: None)
    monkeypatch.setattr(vlm, "_sleep", lambda s: None)


def _experiment(path: Path, workdir: Path, name: str, base_url: str, optimizer: str = "gepa") -> Path:
    body = {"name": optimizer}
    if optimizer == "gepa":
        body["max_metric_calls"] = 4
    model = {"model": f"openai/{name}", "api_base": base_url, "api_key": "unused", "timeout_s": TIMEOUT_S,
             "num_retries": 1}
    path.write_text(experiment_toml(workdir, name=name, optimizer=body, models={"task": model},
                                    tracking={"traces": False}))
    return path


def _registered(workdir: Path) -> set[str]:
    uri = f"sqlite:///{(workdir / 'mlflow.db').resolve()}"
    if not (workdir / "mlflow.db").exists():
        return set()
    client = mlflow.MlflowClient(tracking_uri=uri, registry_uri=uri)
    return {f"{p.name}/{v.version}" for p in client.search_prompts() for v in client.search_prompt_versions(p.name)}


def _invoke(args: list[str]):
    u0 = USAGE.total()
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, args)
    u = USAGE.total()
    return res, time.perf_counter() - t0, (u.attempts - u0.attempts, u.failed_attempts - u0.failed_attempts)


def _assert_quiet_failure(res, wall: float, requests: int) -> None:
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output and "Traceback" not in res.stderr
    err = [line for line in res.stderr.splitlines() if line.strip()]
    assert err and err[-1].startswith("error: "), res.stderr
    assert "registered" not in res.stdout or "no prompt registered" in res.stdout
    assert 0 < requests <= MAX_REQUESTS
    assert wall < requests * TIMEOUT_S + 30, "a hang costs at most the timeout per attempt"


def _fails_then_recovers(fake, mode: str, workdir, run_dir, failing: list, fixed: list,
                         max_requests: int | None = None) -> dict:
    """Run `failing` against the endpoint in `mode`: a quiet failure, every attempt counted, nothing
    registered or reported; then `fixed` on the mended endpoint: it is asked again (no bad reply
    cached) and every split is scored. Returns the second run's report."""
    before = _registered(workdir)
    fake.mode = mode
    fake.reset_counts()
    res, wall, (attempts, failed) = _invoke(failing)
    _assert_quiet_failure(res, wall, fake.requests)
    if max_requests is not None:
        assert fake.requests <= max_requests
    assert "requests to the model all failed or came back unusable" in res.stderr, "the first-requests stop"
    if mode == "hang":  # without the timeout each request would wait HANG_S
        assert wall < fake.requests * HANG_S / 2
    assert attempts == fake.requests, "every request sent is counted, retries too"
    if mode in ("500", "429", "hang", "malformed"):
        assert failed == fake.requests
    assert _registered(workdir) == before, "nothing registered from an all-error run"
    assert not (run_dir / "report.json").exists()

    fake.mode = "ok"
    fake.reset_counts()
    res, wall, (attempts, failed) = _invoke(fixed)
    assert res.exit_code == 0, res.output
    assert fake.requests > 0, "no bad reply was served from the cache"
    rep = json.loads((run_dir / "report.json").read_text())
    for split, body in rep["splits"].items():
        for phase in ("before", "after"):
            s = body[phase]
            assert s["n"] > 0 and s["scored"] == s["n"] and s["errors"] == 0, (split, phase, s)
    assert rep["usage_this_run"]["attempts"] == attempts == fake.requests and failed == 0
    return rep


@pytest.mark.parametrize("mode", FAULTS)
def test_run_against_a_failing_endpoint_stops_then_a_fixed_one_is_asked_again(mode, fake, workdir, tmp_path):
    name = f"fault-{mode}"  # the model is named after the mode: no test is served another's cache
    optimizer = "gepa" if mode in ("500", "empty") else "none"  # GEPA costs seconds; two modes show it
    exp = _experiment(tmp_path / "exp.toml", workdir, name, fake.base_url, optimizer)
    run_dir = tmp_path / "run"
    _fails_then_recovers(fake, mode, workdir, run_dir, ["run", str(exp), "--run-dir", str(run_dir)],
                         ["run", str(exp), "--run-dir", str(run_dir), "--json"])


def test_flaky_endpoint_every_attempt_counted(fake, workdir, tmp_path):
    exp = _experiment(tmp_path / "exp.toml", workdir, "fault-flaky", fake.base_url)
    fake.mode = "flaky"
    fake.reset_counts()
    res, wall, (attempts, failed) = _invoke(["run", str(exp), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    u = rep["usage_this_run"]
    assert fake.by_mode["500"] >= 1
    assert (u["attempts"], u["failed_attempts"]) == (fake.requests, fake.by_mode["500"]) == (attempts, failed)
    assert f"{fake.requests} requests sent (retries included), {fake.by_mode['500']} failed" in res.stdout
    assert all(b["before"]["scored"] == b["before"]["n"] for b in rep["splits"].values())
    if not rep["instructions_changed"]:  # the fake's proposals rarely change anything: nothing new to register
        assert "optimized prompt registered" not in res.stdout and "no prompt registered" in res.stdout
        assert "prompt_uri" not in rep


def test_model_call_logs_only_with_verbose(fake, workdir, tmp_path):
    """DSPy's per-call warnings (a truncated reply) and tracebacks reach no handler unless -v."""
    import logging

    seen: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    catch = Catch()
    logging.getLogger("dspy").addHandler(catch)
    try:
        fake.mode = "truncated"
        for verbose in (False, True):
            seen.clear()
            exp = _experiment(tmp_path / f"exp{verbose}.toml", workdir, f"fault-logs-{verbose}", fake.base_url, "none")
            res, _, _ = _invoke(["-v"] * verbose + ["run", str(exp), "--run-dir", str(tmp_path / f"run{verbose}")])
            assert res.exit_code == 1 and "Traceback" not in res.stderr
            assert any("truncated" in m for m in seen) == verbose, seen
    finally:
        logging.getLogger("dspy").removeHandler(catch)
        from verifirst.cli import set_verbosity

        set_verbosity(False)


# The first judge item: its 1st evaluation attempt sends 4 requests (1 + the CLI's 3 retries), 4 < 5, so it
# is retried once; after 8 the early stop fires, before a 3rd attempt.
CAL_MAX_REQUESTS = 8


def _calibrate_args(mode: str, workdir: Path, run_dir: Path) -> list[str]:
    return ["calibrate", "--outcomes", str(REPO / "examples" / "outcomes.jsonl"), "--model",
            f"openai/cal-{mode}", "--timeout-s", str(TIMEOUT_S), "--max-iters", "1", "--limit", "8",
            "--workdir", str(workdir), "--run-dir", str(run_dir)]


@pytest.fixture
def served(fake, monkeypatch):
    """calibrate's --model names a LiteLLM model; its endpoint comes from the environment."""
    monkeypatch.setenv("OPENAI_API_BASE", fake.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    return fake


@pytest.mark.parametrize("mode", FAULTS)
def test_calibrate_against_a_failing_endpoint_stops_then_a_fixed_one_is_asked_again(mode, served, workdir, tmp_path):
    fake, run_dir = served, tmp_path / "run"
    args = _calibrate_args(mode, workdir, run_dir)  # the model is named after the mode: no shared cache
    rep = _fails_then_recovers(fake, mode, workdir, run_dir, args, args,  # the same run directory: it resumes
                               max_requests=CAL_MAX_REQUESTS)
    assert rep["prompt_uri"].removeprefix("prompts:/") in _registered(workdir)


def test_calibrate_on_a_flaky_endpoint_counts_every_attempt(served, workdir, tmp_path):
    fake = served
    fake.mode = "flaky"
    fake.reset_counts()
    res, wall, (attempts, failed) = _invoke(_calibrate_args("flaky", workdir, tmp_path / "run"))
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output and "Traceback" not in res.stderr
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    u = rep["usage_this_run"]
    assert fake.by_mode["500"] >= 1
    assert (u["attempts"], u["failed_attempts"]) == (fake.requests, fake.by_mode["500"]) == (attempts, failed)
    assert all(b["before"]["scored"] == b["before"]["n"] for b in rep["splits"].values())


def test_router_attempts_counted_retries_too(fake):
    """A role served through LiteLLM's Router: the Router retries, and each of its attempts is counted."""
    from verifirst.lm import make_lm

    lm = make_lm([{"model": "openai/router-flaky", "api_base": fake.base_url, "api_key": "unused",
                   "timeout_s": TIMEOUT_S, "num_retries": 2}], role="judge", cache=False)
    fake.mode = "flaky"
    fake.reset_counts()
    u0 = USAGE.total()
    for k in range(4):
        assert lm(messages=[{"role": "user", "content": f"hi {k}"}])
    u = USAGE.total()
    assert fake.by_mode["500"] >= 1 and fake.requests == 4 + fake.by_mode["500"]
    assert (u.attempts - u0.attempts, u.failed_attempts - u0.failed_attempts) == (fake.requests, fake.by_mode["500"])
