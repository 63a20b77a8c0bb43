"""MLflow tracking: one parent run per experiment, nested runs per step and split.

Nested runs are created through MlflowClient with explicit ids, never the thread-local
fluent stack, so optimizer threads cannot leave orphan runs. DSPy calls are traced with
mlflow.dspy.autolog, and each evaluated item's trace gets the verifier verdict as feedback.
Params, tags, JSON artifacts, prompt tags and every span lose their credentials on the way out
(verifirst.core.redaction).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

from verifirst.core.errors import InputError, VerifirstError  # noqa: E402
from verifirst.core.redaction import install_log_redaction, redact, redact_text, span_processor  # noqa: E402
from verifirst.loop.rundir import file_lock  # noqa: E402

# The user's MLFLOW_TRACKING_URI as it was at start: mlflow.set_tracking_uri() rewrites the
# variable, and a later run in this process must not inherit an earlier run's store.
_USER_URI = os.environ.get("MLFLOW_TRACKING_URI")


def user_tracking_uri() -> str | None:
    """The user's MLFLOW_TRACKING_URI as it was when verifirst started (None: not set), never one
    that mlflow.set_tracking_uri wrote into the environment since."""
    return _USER_URI


def default_uri(workdir: str | Path) -> str:
    return f"sqlite:///{Path(workdir).resolve() / 'mlflow.db'}"


def store_lock(uri: str) -> contextlib.AbstractContextManager:
    """A file lock next to a sqlite store (DB.lock): MLflow's first-use migration and get-or-create
    of an experiment are not safe in two processes at once. Other stores: no lock.

    Args:
        uri: the tracking URI.
    """
    if not uri.startswith("sqlite:///"):
        return contextlib.nullcontext()
    db = Path(uri[len("sqlite:///"):].split("?", 1)[0])
    return file_lock(db.with_name(db.name + ".lock"))


def _store_registries() -> list[tuple[str, Any]]:
    """MLflow's scheme registries (built-in stores and plugins' entry points): tracking, then model
    registry; a run uses the one URI for both. Empty where a later MLflow moved them."""
    try:
        from mlflow.tracking._model_registry.utils import _get_store_registry
        from mlflow.tracking._tracking_service.utils import _tracking_store_registry
    except ImportError:  # no check then: MLflow's own error still stops the run
        return []
    return [("tracking", _tracking_store_registry), ("model registry", _get_store_registry())]


def _where(uri: str) -> str:
    """The option a URI came from, for an error: MLFLOW_TRACKING_URI when it is the user's variable."""
    return "MLFLOW_TRACKING_URI" if _USER_URI and uri == _USER_URI else "tracking.uri"


def check_uri(uri: str, field: str | None = None, *, path: str | None = None, line: int | None = None) -> None:
    """Refuse a tracking URI whose scheme no MLflow store takes, without connecting: MLflow's own
    tracking and model-registry registries decide, so every scheme MLflow (or a plugin) supports passes.

    Args:
        uri: the tracking URI (also the run's registry URI).
        field: the option it came from, e.g. "--tracking-uri" (default: tracking.uri, or
            MLFLOW_TRACKING_URI when it is that variable's value).
        path: the experiment file it came from, if any.
        line: its line there, if known.

    Raises:
        InputError: naming the field (and file and line) and the schemes MLflow takes.
    """
    from mlflow.exceptions import MlflowException

    for kind, registry in _store_registries():
        try:
            registry.get_store_builder(uri)  # the lookup only: the store is not built, nothing connects
        except MlflowException as e:
            schemes = ", ".join(sorted(s for s in getattr(e, "supported_uri_schemes", []) if s))
            scheme = urllib.parse.urlparse(uri).scheme
            raise InputError(f"MLflow has no {kind} store for URI scheme {scheme!r}", path=path, line=line,
                             field=field or _where(uri),
                             expected=f"a local path, or a URI with a scheme MLflow takes: {schemes}; "
                                      "e.g. sqlite:///mlflow.db or http://127.0.0.1:5000") from None


def check_reachable(uri: str, timeout_s: float = 5.0) -> None:
    """Fail before any work when MLflow has no store for the URI's scheme, or a tracking server does
    not answer.

    Args:
        uri: the tracking URI.
        timeout_s: how long a server may take to answer /health.
    """
    check_uri(uri)
    if uri.startswith("sqlite:///"):
        from verifirst.tracking.runs import check_sqlite_store

        check_sqlite_store(uri)
    if not uri.startswith(("http://", "https://")):
        return
    import urllib.request

    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as r:
            if r.status != 200:
                raise OSError(f"HTTP {r.status}")
    except Exception as e:
        raise VerifirstError(
            f"MLflow tracking server {uri} is unreachable ({e}). Start it "
            f"(`mlflow server --host 127.0.0.1 --port 5000`), fix --tracking-uri / MLFLOW_TRACKING_URI, "
            f"or pass --offline to log to the local store.") from None


def _flat(d: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}." if prefix or True else ""))
        return {k.rstrip("."): v for k, v in out.items()}
    out[prefix.rstrip(".")] = str(d)[:6000]
    return out


@contextlib.contextmanager
def _masked_copy(path: Path, max_bytes: int = 64 << 20) -> Iterator[Path]:
    """`path`, or a copy of it with every registered credential masked when it holds one
    (files written by other libraries, such as a saved DSPy program, skip verifirst's writers)."""
    try:
        text = path.read_bytes().decode("utf-8") if path.is_file() and path.stat().st_size <= max_bytes else None
    except (OSError, UnicodeDecodeError):  # binary (a plot) or unreadable: as it is
        text = None
    clean = redact_text(text) if text else text
    if clean == text:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="verifirst-masked-") as d:
        copy = Path(d) / path.name
        copy.write_text(clean, encoding="utf-8")
        yield copy


def _add_span_processor(tracing) -> None:
    """Every exported span goes through verifirst.core.redaction.span_processor (kept beside any
    processor the user configured)."""
    from mlflow.tracing.config import get_config

    current = list(get_config().span_processors or [])
    if span_processor not in current:
        tracing.configure(span_processors=[*current, span_processor])


class Tracker:
    """Wraps one MLflow experiment run. `enabled=False` gives a tracker that logs nothing."""

    def __init__(self, workdir: str | Path, uri: str | None = None, experiment: str = "verifirst",
                 enabled: bool = True, offline: bool = False, autolog: bool = True):
        self.workdir = Path(workdir)
        self.enabled = enabled
        self.experiment_name = experiment
        self.parent_id: str | None = None
        self.experiment_id: str | None = None
        self._lock = threading.Lock()
        self._autolog = autolog
        self.failures = 0  # best-effort trace operations that raised: counted, reported, not fatal
        self.first_failure: str | None = None
        uri = uri or _USER_URI
        if offline or not uri:
            uri = default_uri(self.workdir)
        self.uri = uri
        if enabled:
            check_reachable(uri)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, run_name: str, params: dict | None = None, tags: dict | None = None) -> str | None:
        if not self.enabled:
            return None
        import mlflow

        self.workdir.mkdir(parents=True, exist_ok=True)
        mlflow.set_tracking_uri(self.uri)
        mlflow.set_registry_uri(self.uri)
        with store_lock(self.uri):  # two first runs at once: one creates the tables and the experiment
            exp = mlflow.get_experiment_by_name(self.experiment_name)
            if exp is None:
                art = None
                if self.uri.startswith("sqlite:"):
                    art = (self.workdir / "mlartifacts").resolve().as_uri()
                self.experiment_id = mlflow.create_experiment(self.experiment_name, artifact_location=art)
            else:
                self.experiment_id = exp.experiment_id
        self._caller_experiment_env = os.environ.get("MLFLOW_EXPERIMENT_ID")  # set_experiment overwrites it
        mlflow.set_experiment(experiment_id=self.experiment_id)
        install_log_redaction()
        from verifirst.tracking.runs import quiet_storage_failures

        quiet_storage_failures()  # a full disk: the run's one message, not a traceback per span
        if self._autolog:
            import mlflow.dspy
            import mlflow.tracing

            _add_span_processor(mlflow.tracing)

            mlflow.dspy.autolog(log_traces=True, log_traces_from_compile=False, log_traces_from_eval=True,
                                log_compiles=False, log_evals=False, silent=True)
        run = mlflow.start_run(run_name=run_name, tags=redact({k: str(v) for k, v in (tags or {}).items()}))
        self.parent_id = run.info.run_id
        if params:
            self.log_params(params)
        return self.parent_id

    def finish(self, status: str = "FINISHED") -> None:
        if not self.enabled or self.parent_id is None:
            return
        import mlflow

        with contextlib.suppress(Exception):
            mlflow.flush_trace_async_logging()
        mlflow.end_run(status=status)
        if self._autolog:
            import mlflow.dspy

            mlflow.dspy.autolog(disable=True, silent=True)
        # MLflow's set_experiment left this run's experiment id in the process environment, where a later
        # MLflow call of the caller (another store, another experiment) would find it: put back theirs.
        if getattr(self, "_caller_experiment_env", None) is None:
            os.environ.pop("MLFLOW_EXPERIMENT_ID", None)
        else:
            os.environ["MLFLOW_EXPERIMENT_ID"] = self._caller_experiment_env

    @property
    def client(self):
        from mlflow import MlflowClient

        return MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)

    @contextlib.contextmanager
    def child(self, name: str, params: dict | None = None, tags: dict | None = None) -> Iterator[str | None]:
        """A nested run under the parent; FAILED if the block raises, FINISHED otherwise."""
        if not self.enabled or self.parent_id is None:
            yield None
            return
        all_tags = redact({"mlflow.parentRunId": self.parent_id, "mlflow.runName": name, **(tags or {})})
        run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=name)
        rid = run.info.run_id
        if params:
            self.log_params(params, run_id=rid)
        try:
            yield rid
        except BaseException as e:  # a run stopped by a signal ends KILLED (the loop marks it so)
            self.client.set_terminated(rid, status=getattr(e, "mlflow_status", "FAILED"))
            raise
        self.client.set_terminated(rid, status="FINISHED")

    # -- logging -----------------------------------------------------------------------
    def log_params(self, params: dict, run_id: str | None = None) -> None:
        if not self.enabled:
            return
        from mlflow.entities import Param

        rid = run_id or self.parent_id
        flat = _flat(redact(params))
        items = [Param(k[:250], v[:6000]) for k, v in flat.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(rid, params=items[i:i + 100])

    def log_metrics(self, metrics: dict[str, float], step: int = 0, run_id: str | None = None) -> None:
        if not self.enabled:
            return
        import time

        from mlflow.entities import Metric

        rid = run_id or self.parent_id
        ts = int(time.time() * 1000)
        ms = [Metric(k, float(v), ts, int(step)) for k, v in metrics.items()
              if isinstance(v, (int, float)) and v == v]
        if ms:
            self.client.log_batch(rid, metrics=ms)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None, run_id: str | None = None) -> None:
        """Log a file; a text file holding a registered credential is logged as a masked copy.

        Args:
            path: the file (or directory, logged as it is).
            artifact_path: the folder in the run's artifacts.
            run_id: the run; the parent run when None.
        """
        if not self.enabled:
            return
        with _masked_copy(Path(path)) as p:
            self.client.log_artifact(run_id or self.parent_id, str(p), artifact_path)

    def log_json(self, obj: Any, name: str, artifact_path: str | None = None, run_id: str | None = None) -> None:
        if not self.enabled:
            return
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / name
            p.write_text(json.dumps(redact(obj), indent=2, default=str))
            self.log_artifact(p, artifact_path, run_id)

    def log_table(self, data: dict[str, list], artifact_file: str, run_id: str | None = None) -> None:
        """A table artifact (MLflow's log_table: shown in the run's artifact view and its
        Evaluation tab); a JSON file of the same columns where log_table is unavailable.

        Args:
            data: columns by name, each a list of one value per row.
            artifact_file: where it goes in the run's artifacts, e.g. "inspection/per_item.json".
            run_id: the run; the parent run when None.
        """
        if not self.enabled:
            return
        rid = run_id or self.parent_id
        client = self.client
        if hasattr(client, "log_table"):
            try:
                client.log_table(rid, data=redact(data), artifact_file=artifact_file)
                return
            except ImportError:  # log_table needs pandas
                pass
        folder, _, name = artifact_file.rpartition("/")
        self.log_json(data, name, folder or None, rid)

    def has_artifact(self, artifact_path: str, run_id: str | None = None) -> bool:
        """Whether the run already holds this artifact file.

        Args:
            artifact_path: its path in the run's artifacts, e.g. "inspection/per_item.json".
            run_id: the run; the parent run when None.
        """
        if not self.enabled:
            return False
        folder = artifact_path.rpartition("/")[0] or None
        return any(f.path == artifact_path for f in self.client.list_artifacts(run_id or self.parent_id, folder))

    def set_tags(self, tags: dict[str, str], run_id: str | None = None) -> None:
        if not self.enabled:
            return
        for k, v in redact({k: str(v) for k, v in tags.items()}).items():
            self.client.set_tag(run_id or self.parent_id, k, v)

    # -- traces ------------------------------------------------------------------------
    def note_failure(self, what: str, exc: BaseException) -> None:
        """Count a skipped tracing operation; the first message goes into the report footer.

        Args:
            what: the operation that failed (e.g. "feedback on trace tr-1").
            exc: the exception it raised.
        """
        with self._lock:
            self.failures += 1
            if self.first_failure is None:
                self.first_failure = redact_text(f"{what}: {type(exc).__name__}: {str(exc)[:200]}")

    def feedback_hook(self, run_id: str | None, split: str):
        """A per-item hook, called in the thread that ran the program, that notes the item's trace
        id (the one item_trace opened, else that thread's last trace); `attach_feedback(hook)` then
        attaches every verdict at once (one flush)."""
        if not self.enabled:
            return None
        pending: list = []
        traces: dict = {}  # item id -> (trace id, root span) of the trace item_trace opened

        def hook(item, row) -> None:
            import mlflow

            if not self._autolog:  # no call is traced: the thread's last trace is another run's
                return
            tid, span = traces.pop(item.id, (None, None))
            if span is not None:
                try:
                    span.set_outputs({"status": row.status, "score": row.score,
                                      "output": None if row.output is None else str(row.output)[:4000]})
                except Exception as e:
                    self.note_failure(f"outputs of the trace of item {item.id}", e)
            tid = tid or mlflow.get_last_active_trace_id(thread_local=True)
            if tid:
                pending.append((tid, item.id, row))

        hook.pending, hook.run_id, hook.split, hook.traces = pending, run_id, split, traces  # type: ignore[attr-defined]
        return hook

    def item_trace(self, hook, item) -> contextlib.AbstractContextManager:
        """A context, in the thread that evaluates `item`, whose trace holds all of the item's calls:
        one root span (the split and the item id, the item's inputs) under which every program
        attempt (an LM error retried included) and every call the verifier makes nests; `hook`
        gives that trace the verdict. Nothing without tracing; a tracing failure is counted.

        Args:
            hook: the evaluation's feedback_hook.
            item: the item evaluated.
        """
        if hook is None or not self._autolog:
            return contextlib.nullcontext()
        return self._item_trace(hook, item)

    @contextlib.contextmanager
    def _item_trace(self, hook, item):
        import mlflow
        from mlflow.tracing.provider import detach_span_from_context, set_span_in_context

        try:
            span = mlflow.start_span_no_context(f"{hook.split}/{item.id}", span_type="CHAIN",
                                                inputs=dict(item.inputs),
                                                attributes={"verifirst.item_id": item.id,
                                                            "verifirst.split": hook.split})
            token = set_span_in_context(span)
        except Exception as e:  # untraced, as before: the hook falls back to the last trace
            self.note_failure(f"trace of item {item.id}", e)
            yield
            return
        hook.traces[item.id] = (span.trace_id, span)
        try:
            yield
        finally:
            try:
                detach_span_from_context(token)
                span.end()
            except Exception as e:
                self.note_failure(f"end of the trace of item {item.id}", e)

    def attach_feedback(self, hook) -> int:
        """The verifier's score, pass and feedback as assessments on each item's trace."""
        if hook is None or not getattr(hook, "pending", None):
            return 0
        import mlflow
        from mlflow.entities import AssessmentSource

        try:
            mlflow.flush_trace_async_logging()
        except Exception as e:
            self.note_failure("flush of trace logging", e)
        client, src, n = self.client, AssessmentSource(source_type="CODE", source_id="verifirst.verifier"), 0
        for tid, item_id, row in hook.pending:
            try:
                client.set_trace_tag(tid, "verifirst.item_id", item_id)
                client.set_trace_tag(tid, "verifirst.split", hook.split)
                mlflow.log_feedback(trace_id=tid, name="verifier_score", value=row.score,
                                    rationale=redact_text(row.feedback or row.status)[:4000], source=src,
                                    metadata={"stage": str(row.stage), "status": row.status,
                                              "item_id": item_id, "split": hook.split})
                mlflow.log_feedback(trace_id=tid, name="verifier_pass", value=row.passed, source=src)
                n += 1
            except Exception as e:  # tracing is best-effort; the result rows are the record
                self.note_failure(f"feedback on trace {tid} (item {item_id})", e)
        if hook.run_id:
            ids = [t for t, _, _ in hook.pending]
            for i in range(0, len(ids), 100):
                try:
                    client.link_traces_to_run(ids[i:i + 100], hook.run_id)
                except Exception as e:
                    self.note_failure(f"linking {len(ids[i:i + 100])} traces to run {hook.run_id}", e)
        hook.pending.clear()
        return n

    # -- prompt registry ---------------------------------------------------------------
    def register_prompt(self, name: str, template: str, tags: dict[str, str] | None = None,
                        message: str | None = None) -> str | None:
        """Register a prompt version; returns its URI (prompts:/name/version). A rerun that
        produced the same text with the same tags (run id aside) reuses the latest version."""
        if not self.enabled:
            return None
        tags = redact({k: str(v) for k, v in (tags or {}).items()})
        template, message = redact_text(template), redact_text(message) if message else message
        same = self._same_latest_version(name, template, tags)
        if same is not None:
            return f"prompts:/{name}/{same}"
        pv = self.client.register_prompt(name=name, template=template, commit_message=message,
                                         tags=tags)
        return f"prompts:/{pv.name}/{pv.version}"

    def _same_latest_version(self, name: str, template: str, tags: dict[str, str]) -> int | None:
        try:
            versions = list(self.client.search_prompt_versions(name))
        except Exception:  # no such prompt yet
            return None
        if not versions:
            return None
        latest = max(versions, key=lambda v: int(v.version))
        old = dict(latest.tags or {})
        if latest.template != template or any(old.get(k) != v for k, v in tags.items() if k != "run_id"):
            return None
        return int(latest.version)


def log_objective(tracker: Tracker, report: dict, run_dir: str | Path) -> str | None:
    """A cost or latency objective in MLflow: one run with the rule, the choice, the test split's
    deltas and the Pareto plot and table as artifacts; a nested run per candidate with its quality,
    USD and tokens per item and latency p50/p90 per split (the UI's chart view compares them).

    Args:
        tracker: a Tracker not yet started (its experiment and store).
        report: the run report with its "objective" section.
        run_dir: the run directory (plots/pareto.png, report.json).

    Returns:
        The MLflow run id (None when the tracker is disabled).
    """
    sec = report["objective"]
    rid = tracker.start(f"{report.get('experiment', 'run')} {sec['kind']}",
                        params={"objective": sec["kind"], "margin": sec["margin"], "axis": sec["axis"],
                                "chosen": sec["chosen"], "reference": sec["reference"]},
                        tags={"verifirst.objective": sec["kind"], "verifirst.run_dir": str(run_dir)})
    status = "FAILED"
    try:
        test = sec.get("test") or {}
        dq = test.get("delta_quality") or {}
        tracker.log_metrics({"test_delta_pass_rate": dq.get("delta"), "test_delta_ci_lo": (dq.get("ci95") or [None])[0],
                             "test_mcnemar_p": dq.get("mcnemar_p"), "test_delta_usd_per_item": test.get("delta_usd_per_item"),
                             "test_delta_latency_p50_s": test.get("delta_latency_p50_s"),
                             "candidates": len(sec["candidates"])})
        for c in sec["candidates"]:
            tags = {"verifirst.model": c["model"], "verifirst.source": c["source"],
                    "verifirst.chosen": str(c["label"] == sec["chosen"]).lower(),
                    "verifirst.reference": str(c["label"] == sec["reference"]).lower(),
                    "verifirst.pareto_front": str(bool(c.get("front"))).lower()}
            with tracker.child(c["label"], params={"model": c["model"], "source": c["source"]}, tags=tags) as child:
                metrics = {f"{split}_{k}": v for split, body in c["splits"].items()
                           for k, v in body.items() if k in ("pass_rate", "usd_per_item", "tokens_per_item",
                                                               "latency_p50_s", "latency_p90_s")}
                delta = c.get("val_vs_reference") or {}
                metrics.update({"val_delta_vs_reference": delta.get("delta"),
                                "val_delta_ci_lo": (delta.get("ci95") or [None])[0],
                                "non_inferior": float(bool(c.get("non_inferior")))})
                tracker.log_metrics({k: v for k, v in metrics.items() if v is not None}, run_id=child)
        plot = Path(run_dir) / "plots" / "pareto.png"
        if plot.exists():
            tracker.log_artifact(plot, "objective")
        tracker.log_json(sec, "objective.json", "objective")
        status = "FINISHED"
    finally:
        tracker.finish(status)
    return rid
