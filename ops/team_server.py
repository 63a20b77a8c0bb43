"""A team's MLflow: one `mlflow server` on a PostgreSQL store, started from the Debian packages.

The same commands are in docs/integrations.md ("A team's MLflow on PostgreSQL"): `recipe()` renders them from
the builders the tests run (a throwaway cluster adds only the no-fsync options). PostgreSQL refuses
to run as root, so as root the cluster is created and run by an unprivileged user (`nobody` by
default) that owns the data directory.

    from verifirst.ops.team_server import start_postgres, start_mlflow
    pg = start_postgres()                  # throwaway cluster on 127.0.0.1, a free port
    srv = start_mlflow(pg.url("mlflow"))   # http://127.0.0.1:<port>, artifacts proxied by the server
    ...
    srv.stop(); pg.stop()
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN = Path(os.environ.get("VERIFIRST_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = "verifirst"  # the cluster's superuser (a database role, not a system user)
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # no job runner: 1 process, ~0.5 GB
              "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # else a start-up stall retrying a download


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(name: str) -> str:
    """A PostgreSQL binary: the Debian package's directory first, then PATH."""
    exe = PG_BIN / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found in {PG_BIN} or on PATH: install the Debian package "
                                "`postgresql` (apt-get install postgresql)")
    return found


def mlflow_bin() -> str:
    exe = Path(sys.executable).with_name("mlflow")
    return str(exe) if exe.exists() else (shutil.which("mlflow") or "mlflow")


def _run_as(user: str | None) -> dict:
    """Popen arguments that drop to `user` (root only; None keeps the current user)."""
    if user is None:
        return {}
    pw = pwd.getpwnam(user)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


# A throwaway cluster need not survive a crash: no fsync (initdb, commits) makes it several times faster.
NOT_DURABLE = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


def initdb_cmd(pgdata, durable: bool = True) -> list[str]:
    cmd = ["initdb", "-D", str(pgdata), "-U", PG_USER, "--auth=trust", "--encoding=UTF8", "--no-locale"]
    return cmd if durable else cmd + ["--no-sync"]


def pg_start_cmd(pgdata, port, durable: bool = True) -> list[str]:
    # TCP on loopback only; the unix socket lives in the data directory, not /var/run/postgresql
    opts = f"-h 127.0.0.1 -p {port} -k {pgdata}" + ("" if durable else f" {NOT_DURABLE}")
    return ["pg_ctl", "-D", str(pgdata), "-l", f"{pgdata}/server.log", "-o", opts, "-w", "start"]


def createdb_cmd(port, db) -> list[str]:
    return ["createdb", "-h", "127.0.0.1", "-p", str(port), "-U", PG_USER, str(db)]


def pg_stop_cmd(pgdata, mode: str = "fast") -> list[str]:
    return ["pg_ctl", "-D", str(pgdata), "-m", mode, "-w", "stop"]


def backend_uri(port, db) -> str:
    # +psycopg2: SQLAlchemy 2.1 otherwise picks psycopg 3, which the `scale` extra does not install
    return f"postgresql+psycopg2://{PG_USER}@127.0.0.1:{port}/{db}"


def mlflow_cmd(backend, artifacts, port) -> list[str]:
    return ["mlflow", "server", "--backend-store-uri", str(backend), "--artifacts-destination", str(artifacts),
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]


def shell_line(cmd: list[str]) -> str:
    """A command as a shell line; arguments with spaces in double quotes, so $VARIABLES expand."""
    return " ".join(f'"{a}"' if " " in a else a for a in cmd)


def recipe(pgdata: str = "$PGDATA", port: int | str = 5432, db: str = "mlflow",
           artifacts: str = "/srv/mlflow-artifacts", mlflow_port: int | str = 5000) -> list[str]:
    """The shell commands, in order, that start_postgres, start_mlflow and stop run (the docs' recipe).

    Args:
        pgdata: the cluster's data directory (owned by the user that runs PostgreSQL).
        port: PostgreSQL's port on 127.0.0.1.
        db: the database the MLflow server keeps runs, traces and prompts in.
        artifacts: where the server stores artifacts it receives from clients.
        mlflow_port: the MLflow server's port.
    """
    env = " ".join(f"{k}={v}" for k, v in SERVER_ENV.items())
    return [shell_line(initdb_cmd(pgdata)), shell_line(pg_start_cmd(pgdata, port)),
            shell_line(createdb_cmd(port, db)),
            f"{env} {shell_line(mlflow_cmd(backend_uri(port, db), artifacts, mlflow_port))}",
            shell_line(pg_stop_cmd(pgdata))]


@dataclass
class Postgres:
    """A running cluster on 127.0.0.1; stop() shuts it down and removes a throwaway data directory."""

    pgdata: Path
    port: int
    user: str | None  # the system user PostgreSQL runs as (None: this process's user)
    throwaway: bool = True  # removed by stop(), and run without fsync
    databases: list = field(default_factory=list)

    def url(self, db: str = "mlflow") -> str:
        """The SQLAlchemy URL of database `db` (created on first use)."""
        if db not in self.databases:
            self._pg(createdb_cmd(self.port, db))
            self.databases.append(db)
        return backend_uri(self.port, db)

    def _pg(self, cmd: list[str]) -> None:
        r = subprocess.run([pg_bin(cmd[0]), *cmd[1:]], capture_output=True, text=True, cwd=self.pgdata,
                           env=dict(os.environ, HOME=str(self.pgdata)), **_run_as(self.user))
        if r.returncode != 0:
            raise RuntimeError(f"{shell_line(cmd)} exited {r.returncode}: {(r.stderr or r.stdout)[-1500:]}")

    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()

    def stop(self) -> None:
        """Shut the cluster down (a throwaway one immediately: its files are removed next)."""
        if self.running():
            self._pg(pg_stop_cmd(self.pgdata, "immediate" if self.throwaway else "fast"))
        if self.throwaway:
            shutil.rmtree(self.pgdata, ignore_errors=True)


def start_postgres(pgdata: str | Path | None = None, port: int = 0, *, user: str | None = "nobody") -> Postgres:
    """initdb + pg_ctl start on 127.0.0.1 (trust auth, loopback and a private socket directory only).

    Args:
        pgdata: the data directory; None makes a throwaway one under the system temp directory
            (removed by stop(), run without fsync: nothing in it has to survive a crash).
        port: 0 picks a free port.
        user: the system user that owns and runs the cluster when this process is root
            (PostgreSQL refuses root); ignored for other users.
    """
    user = user if os.geteuid() == 0 else None
    throwaway = pgdata is None
    root = Path(pgdata) if pgdata else Path(tempfile.mkdtemp(prefix="verifirst-pg-"))
    root.mkdir(parents=True, exist_ok=True)
    if user is not None:
        pw = pwd.getpwnam(user)
        os.chown(root, pw.pw_uid, pw.pw_gid)
    os.chmod(root, 0o700)
    pg = Postgres(root, port or free_port(), user, throwaway)
    try:
        if not (root / "PG_VERSION").exists():
            pg._pg(initdb_cmd(root, durable=not throwaway))
        pg._pg(pg_start_cmd(root, pg.port, durable=not throwaway))
    except BaseException:
        pg.stop()
        raise
    return pg


@dataclass
class MLflowServer:
    url: str
    proc: subprocess.Popen
    log: Path

    def wait_healthy(self, timeout_s: float = 120.0) -> None:
        """Wait for /health; on failure the server is stopped and its log's tail is in the error."""
        try:
            wait_healthy(self.url, timeout_s, self.proc)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{e}: {self.log.read_text()[-2000:]}") from None

    def stop(self) -> None:
        """Stop the server and its workers (they share its process group)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def start_mlflow(backend: str, artifacts: str | Path | None = None, port: int = 0, *,
                 log: str | Path | None = None, timeout_s: float = 120.0, wait: bool = True) -> MLflowServer:
    """`mlflow server` on 127.0.0.1 with `backend` as its store; waits for /health unless wait=False.

    Args:
        backend: e.g. Postgres.url("mlflow") (postgresql+psycopg2://...), or any store MLflow takes.
        artifacts: the directory the server keeps artifacts in (clients upload through the server,
            so they need no access to it); None: a new temp directory.
        port: 0 picks a free port.
        log: the server's log file (default: next to the artifacts).
        timeout_s: how long a first start (schema migrations) may take.
        wait: False returns at once; call wait_healthy() before use (start other work meanwhile).
    """
    artifacts = Path(artifacts) if artifacts else Path(tempfile.mkdtemp(prefix="verifirst-mlflow-artifacts-"))
    artifacts.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = Path(log) if log else artifacts.parent / f"mlflow-server-{port}.log"
    env = dict(os.environ, **SERVER_ENV)
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = mlflow_cmd(backend, artifacts.resolve(), port)
    cmd[0] = mlflow_bin()
    with open(log, "wb") as fh:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = MLflowServer(f"http://127.0.0.1:{port}", proc, log)
    if wait:
        server.wait_healthy(timeout_s)
    return server


def wait_healthy(url: str, timeout_s: float = 120.0, proc: subprocess.Popen | None = None) -> None:
    """Block until `url`/health answers 200. Raises RuntimeError on timeout or when `proc` exits.

    Args:
        url: the MLflow server's base URL.
        timeout_s: seconds to wait.
        proc: the server process, when this process started it.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"mlflow server at {url} did not answer /health in {timeout_s} s")
