import json
import os
from pathlib import Path

import pytest

# Each xdist worker's sandbox runs at a uid of its own, so a test that counts the processes of the
# sandbox's uid (none left behind) sees only its own worker's runs. Set before the sandbox is imported.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw") and _WORKER[2:].isdigit() and "VERIFIRST_SANDBOX_UID" not in os.environ:
    os.environ["VERIFIRST_SANDBOX_UID"] = str(3_000_000 + 100 * (int(_WORKER[2:]) + 1))
# and the embedded model's threads share the cores between the workers (two models of 2 threads on
# 2 cores stall each other at every step: a 3-minute journey took over 12)
if _WORKER and "VERIFIRST_LOCAL_THREADS" not in os.environ:
    _n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    os.environ["VERIFIRST_LOCAL_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // max(1, _n)))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VERIFIRST_SHARED", REPO.parent / "shared"))
SHARED_DATA = SHARED / "data"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _no_mlflow_experiment_from_another_test(monkeypatch):
    """mlflow.set_experiment writes MLFLOW_EXPERIMENT_ID into the process environment (a test's own
    MLflow calls, an aligner's report): each test starts without the id another test's store gave."""
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(str(v))  # a TOML basic string: JSON's escapes are TOML's


def experiment_toml(workdir, *, name: str, seed: int | None = None, limit: int = 8,
                    splits: tuple | None = (0.5, 0.25, 0.25), optimizer: str | dict = "none",
                    models: dict | None = None, tracking: dict | None = None) -> str:
    """The text of an experiment file for the bash-builtin suite (bash-generator program, exact
    verifier): `optimizer` a name or a table ({"name": "gepa", "max_metric_calls": 20}), `models`
    role -> model name or inline table, `tracking` the [tracking] table; a section given None is
    left out (no [splits] with splits=None)."""
    tables = {
        "experiment": {"name": name, "workdir": str(workdir), **({} if seed is None else {"seed": seed})},
        "suite": {"name": "bash-builtin", "limit": limit},
        "program": {"name": "bash-generator"},
        "verifier": {"name": "exact"},
        "splits": None if splits is None else {"ratios": list(splits)},
        "optimizer": {"name": optimizer} if isinstance(optimizer, str) else optimizer,
        "models": models,
        "tracking": tracking,
    }
    return "".join(f"[{section}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in body.items())
                   for section, body in tables.items() if body is not None)


def procs_of_uid(uid: int) -> list[int]:
    """The pids of the processes running as `uid` now (a sandbox leaves none behind)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    found.append(int(pid))
            except OSError:
                pass
    return found
