"""The red-team battery's child process (stdlib only: it also runs as an unprivileged uid under
the system python, with a world-readable copy of verifirst on PYTHONPATH).

Reads a JSON spec on stdin: {"uid": sandbox uid as root, "token": ..., "attacks": [...]}, plants
the user's secrets (a key in a fresh session keyring of this process, one in its user keyring),
runs each attack through the public paths (Sandbox.run, Sandbox.run_pair, FehVerifier.verify,
BashTestsVerifier.verify), and prints one JSON object: {"uid", "backend", "results": {id: ...}}.
After each attack it lists the keys that appeared in this process's session and user keyrings
(a run that wrote a key into the user's keyring) and removes them.

Attack kinds: run (command), pair (gold, command, or
"pairs" of them: Sandbox.run_pair; "threads": true runs the pairs at once, each in a thread of its
own, as items evaluated in parallel threads are), seq (commands run one after
the other on one Sandbox), feh (gold or a list of golds, command: FehVerifier.verify per
gold, llm off, no embedder: texts that differ have cosine 0; "verdict" is the first that passed), tests (check, check_files, command: BashTestsVerifier.verify; "repeat": n tries a
race up to n times).
"unsafe": true runs the same without the sandbox (the control that shows the detection works).
"alone": true runs the attack while no other mode's battery runs one (spec "lock": the folder of
the shared lock files), for attacks that measure time: the modes' batteries run at once, and a
mode without cgroups (user-bwrap) starves the whole machine with its own cpu_hog.
"""
import concurrent.futures
import contextlib
import ctypes
import fcntl
import json
import os
import sys
import time
import traceback

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_add_key, SYS_keyctl = 248, 250
KEY_SPEC_SESSION, KEY_SPEC_USER = -3, -4
KEYCTL_JOIN, KEYCTL_DESCRIBE, KEYCTL_CLEAR, KEYCTL_UNLINK, KEYCTL_READ, KEYCTL_TIMEOUT, KEYCTL_INVALIDATE = (
    1, 6, 7, 9, 11, 15, 21)


def _keyctl(*args):
    return libc.syscall(SYS_keyctl, *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])


def add_key(desc: str, payload: str, ring: int) -> int:
    p = payload.encode()
    return libc.syscall(SYS_add_key, b"user", desc.encode(), p, ctypes.c_size_t(len(p)), ctypes.c_long(ring))


def ring_keys(ring: int) -> dict[int, str]:
    """{serial: description} of the keys linked in `ring` (our session or user keyring)."""
    buf = ctypes.create_string_buffer(4096)
    n = _keyctl(KEYCTL_READ, ring, buf, 4096)
    out = {}
    for i in range(0, max(0, min(n, 4096)), 4):
        serial = int.from_bytes(buf.raw[i:i + 4], "little", signed=True)
        d = ctypes.create_string_buffer(512)
        if _keyctl(KEYCTL_DESCRIBE, serial, d, 512) > 0:
            out[serial] = d.value.decode(errors="replace")
    return out


def plant(token: str) -> dict:
    """The user's secrets: a key in a fresh session keyring (as a login session holds them) and
    one in the user keyring; both expire by themselves if we die before removing them."""
    _keyctl(KEYCTL_JOIN, ctypes.c_char_p(f"vfrt-ses-{token}".encode()))
    ses = add_key(f"vfrt-session-{token}", f"sk-session-{token}", KEY_SPEC_SESSION)
    usr = add_key(f"vfrt-user-{token}", f"sk-user-{token}", KEY_SPEC_USER)
    for k in (ses, usr):
        if k > 0:
            _keyctl(KEYCTL_TIMEOUT, k, 600)
    return {"session": ses, "user": usr}


def keys_now() -> dict[str, dict[int, str]]:
    return {"session": ring_keys(KEY_SPEC_SESSION), "user": ring_keys(KEY_SPEC_USER)}


def drop_new(base: dict, now: dict) -> list[str]:
    """Descriptions of keys in `now` and not in `base`; unlinked from our keyrings."""
    new = []
    for name, ring in (("session", KEY_SPEC_SESSION), ("user", KEY_SPEC_USER)):
        for serial, desc in now[name].items():
            if serial not in base[name]:
                new.append(f"{name}:{desc}")
                _keyctl(KEYCTL_UNLINK, serial, ring)
    return new


class _Vec(list):
    def __matmul__(self, other):
        return 0.0  # no embedder here: different texts are never similar


def _embed(texts):
    return [_Vec() for _ in texts]


def run_view(r) -> dict:
    return {"stdout": r.stdout[-20000:], "stderr": r.stderr[-4000:], "exit_code": r.exit_code,
            "timed_out": r.timed_out, "signal": r.signal, "truncated": r.truncated,
            "wall_ms": r.timings.get("total_ms"), "added": [e["path"] for e in r.fs_diff.added[:50]],
            "backend": getattr(r, "backend", "")}


def verdict_view(v) -> dict:
    d = v.details or {}
    return {"passed": v.passed, "score": v.score, "stage": v.stage, "feedback": (v.feedback or "")[:4000],
            "equivalent": d.get("equivalent"), "check_exit": d.get("check_exit"),
            "check_output": str(d.get("check_output", ""))[:4000], "candidate": str(d.get("candidate", ""))[:4000]}


@contextlib.contextmanager
def turn(lock_dir: str | None, alone: bool):
    """Holds the room shared, or alone (exclusive) where `alone`; a gate taken first keeps new
    shared holders out while an exclusive one waits, so it is not starved."""
    if not lock_dir:
        yield
        return
    with open(os.path.join(lock_dir, "gate")) as gate, open(os.path.join(lock_dir, "room")) as room:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


def run_one(a: dict, kw: dict, unsafe: bool, res: dict) -> None:
    """Runs one attack through the public paths; its results go into `res`."""
    from verifirst.core.task import Item
    from verifirst.verifiers.bash.feh import FehVerifier
    from verifirst.verifiers.bash.oracle import BashTestsVerifier
    from verifirst.verifiers.bash.sandbox import Sandbox

    kind = a["kind"]
    if kind in ("run", "pair", "seq"):
        sb = Sandbox(**kw, unsafe_local=unsafe)
        res["backend"] = sb.backend
        fx = a.get("fixture", "empty")
        if kind == "run":
            res["runs"] = [run_view(sb.run(a["command"], fx))]
        elif kind == "pair":  # "pairs": several (gold, command) pairs, one after the other ("threads": at once)
            pairs = a.get("pairs") or [(a["gold"], a["command"])]
            if a.get("threads"):  # the Sandbox (and its fork server) was made in this thread
                with concurrent.futures.ThreadPoolExecutor(len(pairs)) as ex:
                    done = list(ex.map(lambda p: sb.run_pair(*p, fx), pairs))
            else:
                done = [sb.run_pair(gold, cmd, fx) for gold, cmd in pairs]
            res["runs"] = [run_view(r) for pair in done for r in pair]
        else:
            res["runs"] = [run_view(sb.run(cmd, fx)) for cmd in a["commands"]]
    elif kind == "feh":
        v = FehVerifier(llm="off", embed=_embed, timeout_s=kw.get("timeout_s", 5.0), unsafe_local=unsafe)
        golds = a["gold"] if isinstance(a["gold"], list) else [a["gold"]]
        res["verdicts"] = [verdict_view(v.verify(Item(a["id"], {"task": a.get("task", "do the task")},
                                                      {"command": g, "fixture": a.get("fixture", "empty")}),
                                                 a["command"])) for g in golds]
        res["verdict"] = next((x for x in res["verdicts"] if x["passed"]), res["verdicts"][-1])
    elif kind == "tests":
        v = BashTestsVerifier(timeout_s=kw.get("timeout_s", 5.0), unsafe_local=unsafe)
        gold = {"command": "", "check": a["check"], "fixture": a.get("fixture", "empty"),
                "check_files": a.get("check_files") or {}}
        # "repeat": a race tried up to n times; "verdict" is the first that passed
        res["verdicts"] = []
        for _ in range(int(a.get("repeat", 1))):
            res["verdicts"].append(verdict_view(v.verify(Item(a["id"], {"task": "t"}, gold), a["command"])))
            if res["verdicts"][-1]["passed"]:
                break
        res["verdict"] = res["verdicts"][-1]
    else:
        raise ValueError(f"unknown kind {kind}")


def main() -> None:
    spec = json.load(sys.stdin)
    if os.geteuid() == 0 and "uid" in spec:  # the sandbox uid as root (read when the sandbox is imported)
        os.environ["VERIFIRST_SANDBOX_UID"] = str(spec["uid"])
    import verifirst.verifiers.bash.sandbox  # noqa: F401 - it reads the uid at import, before the override below

    if os.geteuid() == 0 and "uid" in spec:
        try:
            from verifirst.verifiers.bash import _bwrap
            _bwrap.SANDBOX_UID = spec["uid"]
        except (ImportError, AttributeError):
            pass
    token = spec["token"]
    planted = plant(token)
    backend = ""
    results = {}
    try:
        for a in spec["attacks"]:
            t0 = time.perf_counter()
            base = keys_now()
            res: dict = {}
            kw = dict(a.get("sandbox", {}))
            unsafe = bool(a.get("unsafe"))
            try:
                with turn(spec.get("lock"), bool(a.get("alone"))):
                    run_one(a, kw, unsafe, res)
                backend = backend or ("" if unsafe else res.get("backend", ""))
            except Exception:  # noqa: BLE001 - reported per attack
                res["error"] = traceback.format_exc()[-3000:]
            res["keys_written"] = drop_new(base, keys_now())
            res["wall_s"] = round(time.perf_counter() - t0, 3)
            results[a["id"]] = res
    finally:
        for name, ring in (("session", KEY_SPEC_SESSION), ("user", KEY_SPEC_USER)):
            if planted[name] > 0:  # unlinked, the key goes (invalidating needs a permission we lack)
                _keyctl(KEYCTL_UNLINK, planted[name], ring)
                _keyctl(KEYCTL_INVALIDATE, planted[name])
    print(json.dumps({"uid": os.getuid(), "backend": backend, "planted": planted, "results": results}))


if __name__ == "__main__":
    main()
