"""The typed requests of the verbs `verify bash`, `verify terraform`, `report`, `ui`, `bench` and the
flags of `run` (verifirst.core.request): one field per option (the *_FLAGS maps name each field's
option), checked before the verb reads a file, writes one or starts anything."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, StrictBool, field_validator, model_validator
from pydantic_core import PydanticCustomError

from verifirst.core.request import (NonEmptyStr, PositiveFloat, Request, SpendCount, SpendLimit, UserPath, expand_user,
                                    refused)
from verifirst.requests import Port, RunDir


def _existing_file(p):
    if not p.is_file():
        raise ValueError(f"an existing file ({p} {'is a folder' if p.is_dir() else 'does not exist'})")
    return p


def _command(v: str) -> str:
    if not v.strip():
        raise ValueError("a command (not empty)")
    if "\x00" in v:
        raise ValueError("a command without a NUL byte")
    return v


ExistingFile = Annotated[UserPath, AfterValidator(_existing_file)]
Command = Annotated[str, AfterValidator(_command)]
TIMEOUT_MAX_S = 3600.0  # one command, one verdict: an hour is a typo's ceiling, not a wait
Timeout = Annotated[PositiveFloat, Field(le=TIMEOUT_MAX_S)]


class VerifyBashRequest(Request):
    """`verifirst verify bash`: one field per flag."""

    gold: Optional[Command] = None
    pred: Command
    fixture: NonEmptyStr = "nl2sh-fs1"
    task: Optional[str] = None
    llm: Literal["off", "confirm", "arbiter"] = "off"
    model: NonEmptyStr = "local"
    params: Optional[ExistingFile] = None
    timeout: Timeout = 5.0
    unsafe_local: StrictBool = False
    check: Optional[ExistingFile] = None
    as_json: StrictBool = False

    @model_validator(mode="after")
    def _gold_or_check(self):
        if self.gold is None and self.check is None:
            raise PydanticCustomError("gold_or_check", "--gold (a reference command) or --check (a check script)")
        return self


Gate = Literal["validate", "plan", "opa", "checkov"]


class VerifyTerraformRequest(Request):
    """`verifirst verify terraform`: one field per flag (whether PATH, --policy and --schema exist and
    parse is the verifier's check: it names the file and line)."""

    path: UserPath
    policy: Optional[UserPath] = None
    backend: Literal["auto", "terraform", "python", "real"] = "auto"
    schema_file: Optional[UserPath] = None
    as_json: StrictBool = False
    gates: Optional[Annotated[tuple[Gate, ...], Field(min_length=1)]] = None


def _store_of(workdir: Path) -> Path:
    return workdir / "mlflow.db"


class ReportRequest(Request):
    """`verifirst report`: one field per flag. RUN that is neither `latest` nor a run directory is a
    run id looked up in --workdir's MLflow store, which must exist: opening a store that is not
    there would create an empty one (a mistyped --workdir). MLFLOW_TRACKING_URI, when set, is the store."""

    run: NonEmptyStr
    workdir: UserPath
    html: Optional[UserPath] = None
    as_json: StrictBool = False

    @model_validator(mode="after")
    def _workdir_exists(self):
        if self.run == "latest" or expand_user(self.run).is_dir():
            return self  # read from files only: a missing workdir has no finished run, and nothing is created
        from verifirst.tracking import user_tracking_uri  # the user's variable, not one mlflow wrote

        if user_tracking_uri():
            return self  # a run id in the user's own store
        if not _store_of(self.workdir).is_file():
            raise PydanticCustomError("workdir", "a run directory, or a workdir with an MLflow store ({store} does "
                                      "not exist; nothing was created)", {"store": str(_store_of(self.workdir))})
        return self


class UiRequest(Request):
    """`verifirst ui`: one field per flag. The store is --tracking-uri, else --workdir's when given,
    else MLFLOW_TRACKING_URI, else ./.verifirst's; a workdir store must exist (a mistyped --workdir
    would start a UI on a new, empty store); the host must resolve and the port be free."""

    workdir: Optional[UserPath] = None
    tracking_uri: Optional[NonEmptyStr] = None
    port: Port = 5000
    host: NonEmptyStr = "127.0.0.1"

    def store(self, default_workdir: Path) -> tuple[str, Path | None]:
        """(the tracking URI to serve, the workdir whose store it is or None).

        Args:
            default_workdir: the workdir when neither a flag nor MLFLOW_TRACKING_URI names a store.
        """
        from verifirst.tracking import default_uri

        if self.tracking_uri:
            return self.tracking_uri, None
        if self.workdir is None and os.environ.get("MLFLOW_TRACKING_URI"):
            return os.environ["MLFLOW_TRACKING_URI"], None
        workdir = self.workdir or default_workdir
        return default_uri(workdir), workdir

    def check_can_serve(self, default_workdir: Path) -> str:
        """The URI to serve, after the checks a server start would fail on later; RequestRefused
        naming the flag otherwise.

        Args:
            default_workdir: as for `store`.
        """
        import socket

        uri, workdir = self.store(default_workdir)
        problems = []
        if workdir is not None and not _store_of(workdir).is_file():
            problems.append(("workdir", str(workdir), f"a workdir with an MLflow store ({_store_of(workdir)} does not "
                                                       "exist; nothing was created: run `verifirst run` first)"))
        elif workdir is None and uri.startswith("sqlite:///"):  # a sqlite file MLflow would create empty
            db = Path(uri[len("sqlite:///"):].split("?", 1)[0])
            if not db.is_file():
                flag = "tracking_uri" if self.tracking_uri else "MLFLOW_TRACKING_URI"
                problems.append((flag, uri, f"an MLflow store that exists ({db} does not; nothing was created)"))
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError, OSError) as e:
            problems.append(("host", self.host, f"a host name that resolves ({getattr(e, 'strerror', None) or e})"))
        else:
            family, kind, proto, _, addr = infos[0]
            with socket.socket(family, kind, proto) as s:
                try:
                    s.bind(addr)
                except OSError as e:
                    problems.append(("port", self.port, f"a free port ({self.host}:{self.port}: "
                                                        f"{e.strerror or e})"))
        if problems:
            raise refused(problems, names=UI_FLAGS)
        return uri


# Flags every study (`verifirst bench NAME ...`) that has them reads the same way.
BENCH_COUNTS = ("--limit", "--threads", "--repeats", "--n", "--seed", "--snippets", "--max-metric-calls")


class BenchRequest(Request):
    """`verifirst bench NAME ARGS...`: the study's name and its arguments. Each study parses its own
    flags; the counts every study shares (--limit, --threads, ...) are checked here, and no number
    anywhere may be nan or inf."""

    name: NonEmptyStr
    args: tuple[str, ...] = ()

    @field_validator("args")
    @classmethod
    def _counts(cls, args):
        for i, a in enumerate(args):
            flag, eq, value = a.partition("=")
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
            if flag in BENCH_COUNTS and (eq or i + 1 < len(args)):
                ok = value.isdigit() and (int(value) > 0 or flag == "--seed")
                if not ok:
                    raise PydanticCustomError("count", "{flag} takes a whole number{more}, not {value!r}",
                                              {"flag": flag, "value": value,
                                               "more": " >= 0" if flag == "--seed" else " > 0"})
            if value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity") and a.startswith("-"):
                raise PydanticCustomError("finite", "{flag}: a finite number, not {value!r}",
                                          {"flag": flag, "value": value})
        return args

# Each verb's options -> the field of its request ("" names a check of the whole request).
VERIFY_BASH_FLAGS = {"gold": "--gold", "pred": "--pred", "fixture": "--fixture", "task": "--task", "llm": "--llm",
                     "model": "--model", "params": "--params", "timeout": "--timeout", "unsafe_local": "--unsafe-local",
                     "check": "--check", "as_json": "--json", "": "--gold"}
VERIFY_TERRAFORM_FLAGS = {"path": "PATH", "policy": "--policy", "backend": "--backend", "schema_file": "--schema",
                          "as_json": "--json", "gates": "--gates"}
REPORT_FLAGS = {"run": "RUN", "workdir": "--workdir", "html": "--html", "as_json": "--json", "": "--workdir"}
UI_FLAGS = {"workdir": "--workdir", "tracking_uri": "--tracking-uri", "port": "--port", "host": "--host",
            "MLFLOW_TRACKING_URI": "MLFLOW_TRACKING_URI"}
BENCH_FLAGS = {"name": "NAME", "args": "ARGS"}


class RunFlags(Request):
    """`verifirst run`'s own options, checked before the experiment file is read; with the file they
    make the OptimizeRequest (RUN_FLAGS says which field each sets)."""

    experiment: UserPath  # config.load says when it is not there, or not a file
    run_dir: Optional[RunDir] = None
    tracking_uri: Optional[NonEmptyStr] = None
    offline: StrictBool = False
    as_json: StrictBool = False
    max_usd: Optional[SpendLimit] = None
    max_tokens: Optional[SpendCount] = None
    max_lm_calls: Optional[SpendCount] = None
    max_wall_s: Optional[SpendLimit] = None
    dry_run: StrictBool = False
    yes: StrictBool = False
    objective: Optional[NonEmptyStr] = None
    margin: Optional[float] = None  # finite here; (0, 1) is config.objective_flags' check, with the objective's words


RUN_FLAG_FIELDS = {"experiment": "EXPERIMENT", "run_dir": "--run-dir", "tracking_uri": "--tracking-uri",
                   "offline": "--offline", "as_json": "--json", "max_usd": "--max-usd", "max_tokens": "--max-tokens",
                   "max_lm_calls": "--max-lm-calls", "max_wall_s": "--max-wall-s", "dry_run": "--dry-run",
                   "yes": "--yes", "objective": "--objective", "margin": "--margin"}
