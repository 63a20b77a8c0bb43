"""Where verifier calls run: threads of this process (`Threads`, the default) or a Ray cluster (`Ray`).

The evaluation loop and the optimizers' metric call the verifier through `executor.metric(metric)`.
Under `Ray` each call goes to a pool of Ray actors; every actor builds its own verifier once (its
own sandbox, its own long-lived terraform provider) from a factory shipped when it starts, and
keeps it for the whole run. A worker that dies is restarted and the call retried; one that keeps
dying on an item raises `WorkerDied`, which evaluation counts as a verifier ERROR, never FAIL.

The program (the LM calls) stays in the driver's threads: LM calls wait on the network, not on
these cores, the disk cache of the LM answers is the driver's (so a Ray run sees exactly the
answers a thread run sees), and the per-item tracking hook runs in the thread whose trace it
reads. Checkpoint rows are written by the driver as results arrive, so a killed driver or worker
loses at most the items in flight.
"""
from __future__ import annotations

import io
import os
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from verifirst.core.errors import ConfigError, VerifirstError

QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_IMPORT_WARNING": "1", "RAY_DEDUP_LOGS": "0",
             "RAY_LOG_TO_STDERR": "0", "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}


class WorkerDied(VerifirstError):
    """A verifier worker died on every attempt at one item (the item is a verifier ERROR)."""


class Executor(Protocol):
    """What the driver and the evaluation loop ask of an executor."""

    name: str

    def concurrency(self, threads: int) -> int:
        """How many items the driver keeps in flight, given the run's `threads`."""

    def metric(self, metric: Any) -> Any:
        """The metric whose verifier calls run on this executor (the same one for threads)."""

    def close(self) -> None:
        """Release workers and connections (the executor can be used again afterwards)."""


@dataclass
class Threads:
    """Verifier calls in the thread that ran the program (today's behaviour).

    Args:
        n: evaluation threads; None keeps the run's `threads`.
    """

    n: int | None = None
    name: str = field(default="thread", init=False)

    def concurrency(self, threads: int) -> int:
        return int(self.n or threads)

    def metric(self, metric: Any) -> Any:
        return metric

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class VerifierSpec:
    """A registered verifier by name and options: how a worker builds its own copy.

    Args:
        name: the registry name (or `package.module:Factory`).
        options: the factory's keyword arguments (an experiment's [verifier] options).
    """

    name: str
    options: dict = field(default_factory=dict)

    def __call__(self) -> Any:
        from verifirst.core import registry
        factory = registry.resolve("verifier", registry.VERIFIERS, self.name, "verifier.name", None)
        return factory(**self.options)


@dataclass
class _Same:
    """A factory that hands back the verifier it was pickled with."""

    verifier: Any

    def __call__(self) -> Any:
        return self.verifier


def _new_lock(reentrant: bool):
    return threading.RLock() if reentrant else threading.Lock()


_LOCKS = {type(threading.Lock()): False, type(threading.RLock()): True}


def dumps(obj: Any) -> bytes:
    """cloudpickle bytes of `obj`, with each lock in it shipped as a fresh one (a verifier guards its
    caches with locks; a worker's copy starts with its own, unlocked).

    Args:
        obj: a verifier factory or a verifier.
    """
    from ray import cloudpickle

    class _Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, o):
            kind = _LOCKS.get(type(o))
            if kind is not None:
                return _new_lock, (kind,)
            return super().reducer_override(o)

    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(obj)
    return buf.getvalue()


class VerifierWorker:
    """A Ray actor's body: builds the verifier once, then verifies items one at a time."""

    def __init__(self, factory: bytes):
        import pickle

        self.verifier = pickle.loads(factory)()
        check = getattr(self.verifier, "preflight", None)
        if callable(check):
            check()  # the sandbox or the provider process is built now, once per worker

    def verify(self, item: Any, candidate: Any) -> Any:
        return self.verifier.verify(item, candidate)

    def explain(self, item: Any, candidate: Any, verdict: Any) -> Any:
        return self.verifier.explain(item, candidate, verdict)

    def pid(self) -> int:
        return os.getpid()


class _Pool:
    """Actors of one verifier; each serves one call at a time, taken from an idle queue."""

    def __init__(self, ray: Any, factory: bytes, n: int, options: dict):
        self._ray, self._factory, self._options = ray, factory, options
        self._cls = ray.remote(VerifierWorker)
        self.actors = [self._spawn() for _ in range(n)]
        self._idle: queue.Queue = queue.Queue()
        for a in self.actors:
            self._idle.put(a)

    def _spawn(self):
        return self._cls.options(**self._options).remote(self._factory)

    def call(self, method: str, *args: Any) -> Any:
        ray = self._ray
        actor = self._idle.get()
        try:
            return ray.get(getattr(actor, method).remote(*args))
        except ray.exceptions.RayTaskError as e:  # the verifier itself raised: the same error as in a thread
            cause = getattr(e, "cause", None)
            raise (cause if isinstance(cause, BaseException) else e) from None
        except ray.exceptions.RayActorError as e:  # the worker died on every retry, or could not be built
            if isinstance(e, ray.exceptions.ActorDiedError):
                self.actors.remove(actor)
                actor = self._spawn()
                self.actors.append(actor)
            raise WorkerDied(f"the verifier worker died on this item after "
                             f"{self._options.get('max_task_retries', 0) + 1} attempt(s): "
                             f"{str(e).splitlines()[0][:200]}") from None
        finally:
            self._idle.put(actor)

    def pids(self) -> list[int]:
        return [self._ray.get(a.pid.remote()) for a in self.actors]

    def kill(self) -> None:
        for a in self.actors:
            try:
                self._ray.kill(a)
            except Exception:  # noqa: BLE001 - an actor already gone needs no killing
                pass
        self.actors = []


class RemoteVerifier:
    """A verifier whose verify (and explain) run on a pool; other attributes read the local one."""

    def __init__(self, local: Any, pool: Callable[[], _Pool]):
        self.local, self._pool = local, pool
        if callable(getattr(local, "explain", None)):
            self.explain = lambda item, cand, verdict: self._pool().call("explain", item, cand, verdict)

    def verify(self, item: Any, candidate: Any) -> Any:
        return self._pool().call("verify", item, candidate)

    def __getattr__(self, name: str) -> Any:
        if name in ("local", "_pool"):
            raise AttributeError(name)
        return getattr(self.local, name)


def _reachable(address: str, timeout_s: float = 5.0, source: str | None = None, line: int | None = None) -> None:
    """A host:port (or ray://host:port) address must accept a connection now: Ray itself would wait
    minutes for a cluster that is not there. 'auto' is left to Ray.

    Args:
        address: the Ray address.
        timeout_s: how long to wait for the connection.
        source: the experiment file that names the address (for the error).
        line: its line there.
    """
    import socket

    hostport = address.split("://", 1)[-1].rstrip("/")
    if address == "auto" or ":" not in hostport:
        return
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except (OSError, ValueError) as e:
        raise ConfigError(f"no Ray cluster answers at {address}: {type(e).__name__}: {e}",
                          path=source, line=line, field="experiment.ray_address",
                          expected="the address of a running cluster (`ray start --head` prints it), 'auto', "
                                   "or empty for a local cluster") from None


class Ray:
    """Verifier calls as Ray actor tasks, one verifier built per worker.

    Args:
        address: None or "" starts a local cluster in this process (num_cpus bound to the
            workers, no dashboard, quiet); "auto" joins the cluster on this machine; a
            "host:port" or "ray://host:10001" address joins that one.
        num_workers: verifier workers (actors); default: this machine's cores for a local cluster,
            the cluster's CPUs otherwise.
        num_cpus_per_worker: CPUs each worker reserves (the scheduler places them by it).
        max_retries: retries of a call whose worker died (the worker is restarted each time).
        verifier_factory: a picklable callable building the verifier in a worker, e.g.
            VerifierSpec(name, options); default: the run's verifier object, pickled.
        temp_dir: Ray's temporary directory for a local cluster (default: a fresh short one in /tmp).
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_workers: int | None = None, *,
                 num_cpus_per_worker: float = 1.0, max_retries: int = 2,
                 verifier_factory: Callable[[], Any] | None = None, temp_dir: str | None = None):
        if address is not None and not isinstance(address, str):
            raise ConfigError(f"ray address is {type(address).__name__}", field="experiment.ray_address",
                              expected="'auto', host:port, a ray:// URL, or empty for a local cluster")
        if num_workers is not None and int(num_workers) < 1:
            raise ConfigError(f"num_workers is {num_workers}", field="num_workers", expected="1 or more")
        self.address = (address or "").strip() or None
        self.num_workers = int(num_workers) if num_workers else None
        self.num_cpus_per_worker = float(num_cpus_per_worker)
        self.max_retries = int(max_retries)
        self.verifier_factory = verifier_factory
        self.temp_dir = temp_dir
        self._lock = threading.Lock()
        self._pools: dict[int, _Pool] = {}
        self._ray: Any = None
        self._owned = False
        self._own_temp: str | None = None

    def __repr__(self) -> str:
        return f"Ray(address={self.address!r}, num_workers={self.num_workers})"

    @property
    def workers(self) -> int:
        """The pool size (before connecting: the configured one, else this machine's cores)."""
        if self.num_workers:
            return self.num_workers
        if self._ray is not None and self.address:
            return max(1, int(self._ray.cluster_resources().get("CPU", 1) // self.num_cpus_per_worker))
        return os.cpu_count() or 1

    def preflight(self, source: str | None = None, line: int | None = None) -> None:
        """Refuse now, before anything is written, a cluster address that nothing answers at.

        Args:
            source: the experiment file naming the address, for the error.
            line: the line of `ray_address` there.
        """
        if self.address:
            _reachable(self.address, source=source, line=line)

    def concurrency(self, threads: int) -> int:
        if self.num_workers is None and self.address:
            self.connect()  # the pool's size is the cluster's
        return max(int(threads), self.workers)

    def metric(self, metric: Any) -> Any:
        from verifirst.core.metric import Metric

        if not isinstance(metric, Metric) or not metric.is_verifier or isinstance(metric.metric, RemoteVerifier):
            return metric  # a plain metric function runs where it is called
        local = metric.metric
        self._pool(local)  # now: an unreachable cluster or an unshippable verifier stops the run before any item
        remote = RemoteVerifier(local, lambda: self._pool(local))
        return Metric(remote, metric.output_field, threshold=metric.threshold, name=metric.name)

    def connect(self) -> Any:
        """The `ray` module, connected (a local cluster started on first use)."""
        with self._lock:
            return self._connect()

    def _connect(self) -> Any:
        if self._ray is not None:
            return self._ray
        for k, v in QUIET_ENV.items():
            os.environ.setdefault(k, v)
        try:
            import ray
        except ImportError:
            raise ConfigError("the Ray executor needs Ray, which is not installed", field="experiment.executor",
                              expected="pip install -e '.[scale]' (or executor = \"thread\")") from None
        if not ray.is_initialized():
            kw: dict[str, Any] = {"log_to_driver": False, "logging_level": "ERROR", "ignore_reinit_error": True}
            if self.address is None:
                tmp = self.temp_dir or tempfile.mkdtemp(prefix="vfray-", dir="/tmp")  # short: socket paths
                os.chmod(tmp, 0o755)  # a sandbox that drops to an unprivileged uid may look inside
                self._own_temp = None if self.temp_dir else tmp
                kw.update(num_cpus=max(1, int(self.workers * self.num_cpus_per_worker + 0.999)),
                          include_dashboard=False, _temp_dir=tmp)
            else:
                _reachable(self.address)
                kw["address"] = self.address
            try:
                ray.init(**kw)
            except Exception as e:  # an unreachable cluster is a configuration error, before any item runs
                raise ConfigError(f"cannot connect to Ray at {self.address or 'a local cluster'}: "
                                  f"{type(e).__name__}: {str(e).splitlines()[0][:300]}",
                                  field="experiment.ray_address",
                                  expected="a running cluster ('ray start --head'), 'auto', or empty") from None
            self._owned = True
        self._ray = ray
        return ray

    def _pool(self, verifier: Any) -> _Pool:
        with self._lock:
            pool = self._pools.get(id(verifier))
            if pool is None:
                ray = self._connect()
                factory = self.verifier_factory or _Same(verifier)
                try:
                    blob = dumps(factory)
                except Exception as e:
                    raise ConfigError(f"the verifier {type(verifier).__name__} cannot be shipped to Ray workers: "
                                      f"{type(e).__name__}: {e}", field="executor",
                                      expected="a picklable verifier, or vf.Ray(verifier_factory=...) "
                                               "building it in the worker") from None
                options = {"max_restarts": -1, "max_task_retries": self.max_retries,
                           "num_cpus": self.num_cpus_per_worker}
                pool = self._pools[id(verifier)] = _Pool(ray, blob, self.workers, options)
            return pool

    def pids(self) -> list[int]:
        """The worker processes' ids, one per actor of every pool (tests kill one)."""
        with self._lock:
            pools = list(self._pools.values())
        return [p for pool in pools for p in pool.pids()]

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.kill()
            self._pools.clear()
            if self._ray is not None and self._owned:
                self._ray.shutdown()
            self._ray, self._owned = None, False
            if self._own_temp:
                shutil.rmtree(self._own_temp, ignore_errors=True)
                self._own_temp = None


def from_config(executor: str, address: str | None, threads: int,
                verifier_factory: Callable[[], Any] | None = None) -> Threads | Ray:
    """The executor an experiment file asks for.

    Args:
        executor: "thread" or "ray" ([experiment] executor).
        address: [experiment] ray_address.
        threads: [experiment] threads: evaluation threads, and under Ray the number of workers.
        verifier_factory: how a Ray worker builds the verifier (the file's [verifier] by name).
    """
    if executor == "ray":
        return Ray(address=address, num_workers=threads if threads > 1 else None, verifier_factory=verifier_factory)
    return Threads(threads)


# -- the run's wall cap, while a metric or verifier runs ------------------------------------------

def within_wall(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args), stopped at the run's max_wall_s: past it the run stops by budget, naming the cap,
    and the call's item gets no verdict (never a FAIL). Without a wall cap fn runs as it is.

    The call runs in a thread the caller waits on until the cap. Past it the call is cancelled:
    MetricCancelled is raised inside it (a BaseException, so a metric's `except Exception` does not
    keep it going) and waited for, CANCEL_GRACE_S at most. A metric blocked in one long C call (a
    lock, a socket read, a subprocess wait) stops when that call returns; its subprocesses are its own.

    Args:
        what: what runs, for the message ("the metric on item t3").
        fn: the metric's or verifier's callable.
        args, kwargs: its arguments.
    """
    import contextvars
    import time

    from verifirst.lm.spend import active_meter

    meter = active_meter()
    deadline = meter.wall_deadline() if meter is not None else None
    if deadline is None:
        return fn(*args, **kwargs)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise meter.refuse_wall(what)
    box: dict[str, Any] = {"in_fn": False}
    ctx = contextvars.copy_context()  # the item's split, request deadline and trace go along

    def target() -> None:
        try:
            try:
                box["in_fn"] = True
                box["value"] = ctx.run(fn, *args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = e
            finally:
                box["in_fn"] = False
        except MetricCancelled:  # a cancel that landed past the metric: nothing left to stop
            pass

    worker = threading.Thread(target=target, name="verifirst-metric", daemon=True)
    worker.start()
    worker.join(remaining)
    if worker.is_alive():
        _cancel(worker, box)
        raise meter.refuse_wall(what)
    if "error" in box:
        raise box["error"]
    return box["value"]


CANCEL_GRACE_S = 2.0  # how long a cancelled metric may take to unwind (its finally blocks, its files)


class MetricCancelled(BaseException):
    """Raised inside a metric or verifier still running at the run's max_wall_s, to stop it."""


def _cancel(worker: threading.Thread, box: dict, grace_s: float = CANCEL_GRACE_S) -> None:
    """Raise MetricCancelled in `worker` while it runs the metric (again every 50 ms: a metric may
    catch it once), and wait for it to end, `grace_s` at most."""
    import ctypes
    import time

    ends = time.monotonic() + grace_s
    while worker.is_alive() and time.monotonic() < ends:
        if box.get("in_fn") and worker.ident is not None:
            hit = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                             ctypes.py_object(MetricCancelled))
            if hit > 1:  # more than one thread state: undo (CPython's documented rule)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), None)
        worker.join(0.05)


class WallCapped:
    """A verifier whose verify (and explain) stop at the run's max_wall_s; other attributes read it."""

    def __init__(self, local: Any):
        self.local = local
        if callable(getattr(local, "explain", None)):
            self.explain = lambda item, cand, verdict: within_wall(
                f"the verifier's explain on item {getattr(item, 'id', '?')}", local.explain, item, cand, verdict)

    def verify(self, item: Any, candidate: Any) -> Any:
        return within_wall(f"the verifier on item {getattr(item, 'id', '?')}", self.local.verify, item, candidate)

    def __getattr__(self, name: str) -> Any:
        if name == "local":
            raise AttributeError(name)
        return getattr(self.local, name)


def wall_capped(metric: Any) -> Any:
    """The run's Metric with its verifier (or plain metric) stopped at the run's max_wall_s, for
    evaluation and the optimizer alike; the same Metric when no wall cap is set.

    Args:
        metric: the run's verifirst Metric.
    """
    import functools

    from verifirst.core.metric import Metric
    from verifirst.lm.spend import active_meter

    meter = active_meter()
    if meter is None or meter.wall_deadline() is None or not isinstance(metric, Metric):
        return metric
    inner = metric.metric
    if isinstance(inner, WallCapped) or getattr(inner, "_wall_capped", False):  # a Ray proxy is capped too
        return metric
    if metric.is_verifier:
        wrapped: Any = WallCapped(inner)
    else:
        @functools.wraps(inner)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return within_wall(f"the metric {metric.name}", inner, *args, **kwargs)

        wrapped._wall_capped = True  # type: ignore[attr-defined]
    return Metric(wrapped, metric.output_field, threshold=metric.threshold if metric.threshold_given else None,
                  name=metric.name)
