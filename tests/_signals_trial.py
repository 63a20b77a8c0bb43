"""One trial of the signals study: `verifirst run` against a fake OpenAI-compatible endpoint on
127.0.0.1 that counts the requests it receives, stopped by SIGINT, SIGTERM or SIGKILL at a random
point, then resumed on the same run directory to its end.

What a trial checks (tests/test_signals.py runs a few; benchmarks/studies/signals_study.py runs
20 per signal and writes the numbers):
- SIGINT and SIGTERM: exit code 130 / 143, one line on stderr, no traceback;
- the resumed run's requests (run_state.json's usage_run_dir, every invocation) equal the
  requests the endpoint received; after kill -9 the endpoint's count lies between the settled
  requests and those plus the requests that were in flight at the kill (`in_flight_at_kill`);
- no MLflow run of the workdir's store is left RUNNING;
- with --max-lm-calls, the endpoint never receives more requests than the cap, across the kill
  and the resume.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fake_endpoint import FakeEndpoint  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
N_ITEMS = 12


def experiment(workdir: Path, base_url: str) -> str:
    """The experiment file: 12 items, no optimizer (before = after), two threads, MLflow on."""
    return f"""
[experiment]
name = "signals"
workdir = "{workdir}"
threads = 2

[suite]
name = "bash-builtin"
limit = {N_ITEMS}

[program]
name = "bash-generator"

[verifier]
name = "exact"

[optimizer]
name = "none"

[models]
task = {{ model = "openai/fake", api_base = "{base_url}", api_key = "sk-fake", timeout_s = 20 }}
"""


def _cli(exp: Path, run_dir: Path, cap: int | None) -> subprocess.Popen:
    args = [sys.executable, "-m", "verifirst.cli", "run", str(exp), "--run-dir", str(run_dir), "--offline"]
    if cap is not None:
        args += ["--max-lm-calls", str(cap)]
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", MLFLOW_ENABLE_ASYNC_TRACE_LOGGING="false",
               PYTHONUNBUFFERED="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _running_mlflow_runs(workdir: Path) -> list[str]:
    import sqlite3

    db = workdir / "mlflow.db"
    if not db.exists():
        return []
    con = sqlite3.connect(str(db))
    try:
        return [r[0] for r in con.execute("select name from runs where status = 'RUNNING'")]
    finally:
        con.close()


def run_trial(base: Path, sig: str, seed: int, cap: int | None = None, latency_s: float = 0.02,
              timeout_s: float = float(os.environ.get("VERIFIRST_SIGNALS_TIMEOUT_S", 600))) -> dict:
    """Start, stop with `sig` once the endpoint has seen a random number of requests, resume.

    Args:
        base: an empty folder for the workdir, run directory and experiment file.
        sig: "SIGINT", "SIGTERM" or "SIGKILL".
        seed: picks the request count (and a few ms after it) at which the signal goes.
        cap: --max-lm-calls for both invocations, or None.
        latency_s: the endpoint's answer time (requests are in flight when the signal comes).
        timeout_s: the most either invocation may take.

    Returns:
        What the trial saw (JSON-able); `ok` is False with `why` when a check failed.
    """
    rng = random.Random(seed)
    workdir, run_dir = base / "wd", base / "wd" / "runs" / "r"
    out: dict = {"signal": sig, "seed": seed, "cap": cap}
    with FakeEndpoint("hang", hang_s=latency_s, lifetime_s=timeout_s * 3) as fake:
        exp = base / "exp.toml"
        exp.write_text(experiment(workdir, fake.base_url))
        limit = min(cap or N_ITEMS, N_ITEMS)
        at = rng.randint(1, max(1, limit - 1))
        out["signal_after_requests"] = at
        proc = _cli(exp, run_dir, cap)
        t0 = time.time()
        while fake.requests < at and proc.poll() is None and time.time() - t0 < timeout_s:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, latency_s * 2))
        sent_at_signal = fake.requests
        if proc.poll() is None:
            proc.send_signal(SIGNALS[sig])
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            return {**out, "ok": False, "why": "the signalled run did not end"}
        out.update(first_rc=proc.returncode, requests_at_signal=sent_at_signal, requests_after_first=fake.requests,
                   first_stderr=err.strip().splitlines()[-3:])
        out["running_after_first"] = len(_running_mlflow_runs(workdir))
        out["first_wall_s"] = round(time.time() - t0, 1)
        t1 = time.time()
        resumed = _cli(exp, run_dir, cap)
        try:
            _, err2 = resumed.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            resumed.kill()
            return {**out, "ok": False, "why": "the resumed run did not end"}
        time.sleep(0.05)  # a request the resumed run abandoned still reaches the counter
        out.update(resume_rc=resumed.returncode, endpoint_requests=fake.requests, resume_wall_s=round(time.time() - t1, 1),
                   resume_stderr=err2.strip().splitlines()[-3:])
    try:
        state = json.loads((run_dir / "run_state.json").read_text())
    except (OSError, ValueError) as e:
        return {**out, "ok": False, "why": f"no run_state.json after the resume: {e}"}
    usage = state.get("usage_run_dir") or {}
    out.update(status=state.get("status"), journal_requests=usage.get("requests"),
               in_flight_at_kill=usage.get("in_flight_at_kill"), invocations=usage.get("invocations"),
               running_after_resume=len(_running_mlflow_runs(workdir)))
    return {**out, **_verdict(out, sig, cap)}


def _verdict(out: dict, sig: str, cap: int | None) -> dict:
    rc = out["first_rc"]
    stopped_before = rc == 0 or (cap is not None and rc == 1)  # it ended before the signal came
    if sig in ("SIGINT", "SIGTERM") and not stopped_before:
        if rc != 128 + SIGNALS[sig]:
            return {"ok": False, "why": f"exit code {rc} after {sig}, expected {128 + SIGNALS[sig]}"}
        lines = out["first_stderr"]
        if any("Traceback" in line for line in lines) or not any(f"interrupted by {sig}" in line for line in lines):
            return {"ok": False, "why": f"stderr after {sig}: {lines}"}
    if sig == "SIGKILL" and rc not in (-9, 0) and not stopped_before:
        return {"ok": False, "why": f"exit code {rc} after SIGKILL"}
    if out["resume_rc"] not in ((0, 1) if cap is not None else (0,)):
        return {"ok": False, "why": f"the resumed run exited {out['resume_rc']}: {out['resume_stderr']}"}
    sent, journal, maybe = out["endpoint_requests"], out["journal_requests"] or 0, out["in_flight_at_kill"] or 0
    exact = sent == journal
    if not exact and not (sig == "SIGKILL" and journal <= sent <= journal + maybe):
        return {"ok": False, "exact": exact, "why": f"the endpoint received {sent} requests, the run counted "
                                                    f"{journal} (+{maybe} in flight at a kill)"}
    if out["running_after_resume"]:
        return {"ok": False, "exact": exact, "why": f"{out['running_after_resume']} MLflow runs left RUNNING"}
    if cap is not None and sent > cap:
        return {"ok": False, "exact": exact, "why": f"{sent} requests reached the endpoint under a cap of {cap}"}
    return {"ok": True, "exact": exact}
