"""Shared test support: a lean local `mlflow server` and a tiny scripted experiment whose
optimization visibly helps (so reports and the UI have something to show)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from verifirst import api
from verifirst import config, experiment
from verifirst.lm import Models
from verifirst.lm.testing import json_answer, scripted_lm

RULE = "Answer with the reference command for the task."


def _gold_by_task() -> dict[str, str]:
    from verifirst.benchmarks.bash_pack import load_bash_pack

    return {it.inputs["task"]: it.gold["command"] for it in load_bash_pack().items}


def make_models() -> Models:
    gold = _gold_by_task()

    def task_fn(messages):
        text = messages[-1]["content"]
        task = next((t for t in gold if t in text), None)
        ruled = RULE in messages[0]["content"]
        # before the rule only tasks of even length are right; after it, all are
        right = task is not None and (ruled or len(task) % 2 == 0)
        return json_answer(command=gold[task] if right else "echo hi")

    return Models(task=scripted_lm(task_fn, cache=True, name="task-scripted"),
                  reflection=scripted_lm(lambda m: json_answer(new_instruction=RULE), role="reflection",
                                         cache=True, name="reflection-scripted"))


def tiny_config(workdir: Path, tracking_uri: str | None = None, limit: int = 16, name: str = "tiny-exp",
                tracking: bool = True):
    d = {
        "experiment": {"name": name, "workdir": str(workdir), "seed": 0},
        "suite": {"name": "bash-builtin", "limit": limit},
        "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"},
        "splits": {"ratios": [0.5, 0.25, 0.25]},
        "optimizer": {"name": "gepa", "max_metric_calls": 20},
        "models": {"task": "local"},
        "tracking": {"enabled": tracking, **({"uri": tracking_uri} if tracking_uri else {})},
    }
    return config.from_dict(d)


def run_tiny(workdir: Path, run_dir: Path, tracking_uri: str | None = None, **kw):
    exp = tiny_config(workdir, tracking_uri, **kw)
    return api.run(exp, run_dir=run_dir, progress=False, models=make_models(), echo=lambda m: None,
                          tracking_uri=tracking_uri)


# -- server ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mlflow_bin() -> str:
    exe = Path(sys.executable).with_name("mlflow")
    return str(exe) if exe.exists() else (shutil.which("mlflow") or "mlflow")


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own group: gunicorn/uvicorn workers too
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def start_server(root: Path, timeout_s: float = 90.0) -> Server:
    """`mlflow server` on 127.0.0.1 with a sqlite store and artifact root under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.pop("MLFLOW_TRACKING_URI", None)
    log = root / "server.log"
    cmd = [mlflow_bin(), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{(root / 'mlflow.db').resolve()}",
           "--default-artifact-root", (root / "artifacts").resolve().as_uri()]
    fh = open(log, "wb")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    server = Server(url, proc, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return server
        except OSError:
            time.sleep(0.3)
    server.stop()
    raise RuntimeError(f"mlflow server did not answer /health in {timeout_s} s: {log.read_text()[-2000:]}")


# -- one tracked run per test session, shared by the server and browser tests ----------------
@dataclass
class TrackedRun:
    server: Server
    out: object  # experiment.RunOutput
    experiment_id: str

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def run_id(self) -> str:
        return self.out.run_id

    def get(self, path: str) -> dict:
        import json

        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.load(r)

    def post(self, path: str, body: dict) -> dict:
        import json

        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    def search_traces(self, max_results: int = 500) -> list[dict]:
        body = {"locations": [{"type": "MLFLOW_EXPERIMENT",
                               "mlflow_experiment": {"experiment_id": self.experiment_id}}],
                "max_results": max_results}
        return self.post("/api/3.0/mlflow/traces/search", body).get("traces", [])


_SHARED: dict[str, TrackedRun] = {}


def shared_tracked_run(request, tmp_path_factory) -> TrackedRun:
    """Start the server and run the tiny experiment against it once per session; the server
    is stopped when the session ends."""
    if "run" in _SHARED:
        if _SHARED["run"].server.proc.poll() is None:
            return _SHARED["run"]
        del _SHARED["run"]
    import mlflow

    from verifirst.tracking import Tracker
    from verifirst.tracking.callback import log_report_files

    root = tmp_path_factory.mktemp("mlflow-server")
    server = start_server(root / "server")
    request.config.add_cleanup(server.stop)
    previous_uri = mlflow.get_tracking_uri()
    try:
        out = run_tiny(root / "wd", root / "run", tracking_uri=server.url)
        log_report_files(Tracker(root / "wd", uri=out.tracking_uri), out.report, out.run_dir)
    except BaseException:
        server.stop()
        raise
    finally:
        mlflow.set_tracking_uri(previous_uri)
    exp = mlflow.MlflowClient(tracking_uri=out.tracking_uri).get_run(out.run_id).info.experiment_id
    _SHARED["run"] = TrackedRun(server, out, exp)
    return _SHARED["run"]
