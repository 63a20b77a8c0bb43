"""The MLflow store and runs around a verifirst run: a sqlite store that is not a database is
refused before any work (named, with what to do); a resumed run ends the runs a killed predecessor
left RUNNING (KILLED); each run logs its train, validation and test splits as MLflow datasets."""
from __future__ import annotations

import json
import logging
import urllib.parse
from pathlib import Path
from typing import Any


def check_sqlite_store(uri: str) -> None:
    """Refuse, before any work, a sqlite MLflow store that is not a readable database (a file cut
    short, overwritten, or not sqlite at all), naming it and what to do.

    Args:
        uri: a sqlite:/// tracking URI.

    Raises:
        StorageError: the store's file exists and sqlite cannot read it (exit code 74).
    """
    import sqlite3

    from verifirst.core.interrupts import StorageError

    db = Path(urllib.parse.unquote(uri[len("sqlite:///"):].split("?", 1)[0]))
    if not db.is_file() or db.stat().st_size == 0:
        return
    try:  # read-only: the store is MLflow's to write; a lock or an I/O error is no corruption
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            con.execute("pragma schema_version").fetchone()
            con.execute("select count(*) from sqlite_master").fetchone()
        finally:
            con.close()
    except sqlite3.OperationalError:
        return
    except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
        why = str(e)
    else:
        return
    raise StorageError(f"the MLflow store {db} is not a readable database ({why}); nothing was run. Move it aside "
                       f"(mv {db} {db}.corrupt) to start a new store here, restore it from a backup, or log "
                       "elsewhere with --tracking-uri (MLFLOW_TRACKING_URI)") from None


def end_stale_runs(tracker: Any, run_dir: str | Path) -> int:
    """End as KILLED the runs a killed predecessor on `run_dir` left RUNNING (its parent run, tagged
    with the run directory, and their nested runs). The run directory's lock says no other process
    is running on it, so a RUNNING run of it is a dead one's.

    Args:
        tracker: the started Tracker (its experiment and new parent run).
        run_dir: the run directory (as the tag verifirst.run_dir holds it).

    Returns:
        How many runs were ended.
    """
    if not tracker.enabled or tracker.experiment_id is None or "'" in str(run_dir):
        return 0
    client, n = tracker.client, 0
    stale = client.search_runs([tracker.experiment_id], max_results=1000,
                               filter_string=f"tags.`verifirst.run_dir` = '{run_dir}' and "
                                             "attributes.status = 'RUNNING'")
    for run in stale:
        if run.info.run_id == tracker.parent_id:
            continue
        children = client.search_runs([tracker.experiment_id], max_results=1000,
                                      filter_string=f"tags.`mlflow.parentRunId` = '{run.info.run_id}' and "
                                                    "attributes.status = 'RUNNING'")
        for child in children:
            client.set_terminated(child.info.run_id, status="KILLED")
            n += 1
        client.set_tag(run.info.run_id, "verifirst.failure", "the process was killed; a later run resumed it")
        client.set_terminated(run.info.run_id, status="KILLED")
        n += 1
    return n


def log_datasets(tracker: Any, datasets: dict, name: str) -> None:
    """Log the run's splits as MLflow datasets (the run page's Datasets section), each with its
    digest and its context: train, validation or test.

    Args:
        tracker: the started Tracker (its parent run gets the datasets).
        datasets: {split: {"digest", "records"}} (verifirst.loop.driver.split_datasets).
        name: the suite's name (each dataset is NAME-SPLIT).
    """
    if not tracker.enabled or not datasets:
        return
    import mlflow.data
    import pandas as pd
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    context = {"train": "train", "val": "validation", "test": "test"}
    inputs = []
    for split, body in datasets.items():
        rows = [{"id": r["id"], "inputs": json.dumps(r.get("inputs"), default=str, sort_keys=True),
                 "gold": json.dumps(r.get("gold"), default=str, sort_keys=True)} for r in body["records"]]
        frame = pd.DataFrame(rows, columns=["id", "inputs", "gold"])
        ds = mlflow.data.from_pandas(frame, name=f"{name}-{split}", digest=body["digest"])
        inputs.append(DatasetInput(ds._to_mlflow_entity(),
                                   tags=[InputTag(MLFLOW_DATASET_CONTEXT, context.get(split, split))]))
    tracker.client.log_inputs(tracker.parent_id, datasets=inputs)  # records are redacted (items.jsonl's)


# -- a store whose disk failed: one message from the run, not a traceback per span ----------------

STORAGE_MARKS = ("database or disk is full", "disk i/o error", "no space left on device",
                 "attempt to write a readonly database", "unable to open database file")


class StorageNoise(logging.Filter):
    """Drops MLflow's log records about its store's disk failing (a full disk logs one traceback
    per span, tag and metric MLflow tries to write): the run stops on that failure with one message
    of its own (verifirst.loop.run_guard.storage_failure). Other records pass. Counts what it drops."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text += " " + repr(record.exc_info[1])
        except Exception:  # noqa: BLE001 - a record that cannot render is left to the handler
            return True
        if any(m in text.lower() for m in STORAGE_MARKS):
            self.dropped += 1
            return False
        return True


STORAGE_NOISE = StorageNoise()


def quiet_storage_failures() -> None:
    """Put StorageNoise on the handlers MLflow logs through (its own "mlflow" handler, and the root
    logger's where MLflow's records propagate); idempotent."""
    mlflow_logger = logging.getLogger("mlflow")
    handlers = list(mlflow_logger.handlers) + (list(logging.getLogger().handlers) if mlflow_logger.propagate else [])
    for h in handlers:
        if STORAGE_NOISE not in h.filters:
            h.addFilter(STORAGE_NOISE)
    if STORAGE_NOISE not in mlflow_logger.filters:  # records logged on "mlflow" itself
        mlflow_logger.addFilter(STORAGE_NOISE)
