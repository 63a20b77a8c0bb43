import os
from pathlib import Path

import pytest

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
