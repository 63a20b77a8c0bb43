"""Shared hooks instead of private names: the user's tracking URI through verifirst.tracking's accessor,
and one call that puts the library log levels back after a verb's heavy imports."""
import ast
import logging
from pathlib import Path

import verifirst.tracking as tracking
from verifirst.cli_run import library_levels_again, set_verbosity

REPO = Path(__file__).resolve().parents[1]


def test_no_module_outside_tracking_reads_its_private_uri():
    readers = []
    for path in sorted((REPO / "verifirst").rglob("*.py")) + sorted((REPO / "judge").rglob("*.py")):
        if "tracking" in path.relative_to(REPO).parts[:2]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name == "_USER_URI" for a in node.names):
                readers.append(str(path.relative_to(REPO)))
    assert readers == []


def test_the_accessor_is_the_variable_as_it_was_at_start(monkeypatch):
    monkeypatch.setattr(tracking, "_USER_URI", "sqlite:///start.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///written-by-mlflow.db")
    assert tracking.user_tracking_uri() == "sqlite:///start.db"


def test_levels_set_again_after_a_library_reset_its_own():
    dspy_logger = logging.getLogger("dspy")
    before = dspy_logger.level
    try:
        set_verbosity(False)
        dspy_logger.setLevel(logging.INFO)  # what `import dspy` does
        library_levels_again()
        assert dspy_logger.level == logging.CRITICAL
        set_verbosity(True)
        dspy_logger.setLevel(logging.ERROR)
        library_levels_again()
        assert dspy_logger.level == logging.INFO
    finally:
        set_verbosity(False)
        dspy_logger.setLevel(before)
