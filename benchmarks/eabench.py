"""NL2Bash-EAbench (IBM/nl2bash-eabench) from a user path, in its public layout, read completely.

<root>/bash_1 (basic), bash_2 (system), bash_3 (multi-line scripts); inside each suite one
directory per test holding `prompt` (task text), `bash.sh` (ground-truth script) and optionally
`name`. Directories without `prompt` (bin/, containers/) are not tests. A few upstream tests keep
their script under another name: they are listed in suite.meta["no_gold"] and left out, or raise
with strict=True.

What a test directory carries reaches the sandbox, as the benchmark's containers see it:

- bash_1: the test's files are copied to /app (modes, executables and symlinks kept),
  `prerequisite.sh` runs there first, and the script is saved as /app/testN.sh and run as
  `bash testN.sh`. The test's own check is `test.py` (it runs the script and writes
  output/results_testN.json with "result": "Pass" or "Fail").
- bash_2 / bash_3: the `home/` tree becomes /home (an absolute symlink in it, such as
  `downloads/soft-link3.dat -> /home/test/uploads/file3.dat`, is kept: it resolves inside
  /home; one that leaves the tree is refused, naming it); the script is saved as /home/test/bash.sh and
  the test's driver `test.sh` runs it (sourcing `pre_test.sh` before and `post_test.sh` after, and
  passing the arguments written there; a test without test.sh gets the benchmark's usual
  driver). The test's own check is `evaluate.sh`, run on the captured output in the benchmark's
  log format with the suite's bin/ helpers on PATH.

Tests that administer users and groups run in the sandbox's sysadmin mode (base `admin_fixture`,
default `sysadmin`: root with a writable /etc per run), chosen from the test's own scripts
(`bash.sh` and its setup: `prerequisite.sh`, `pre_test.sh`, `test.sh`, `post_test.sh`), as the
public layout runs them:

- any suite: a script calls useradd, usermod, userdel, groupadd, groupmod, groupdel, gpasswd,
  passwd, chpasswd, chage, ... (ADMIN_COMMANDS; `getent passwd`/`getent group` only read and do
  not count) or names /etc/shadow, /etc/gshadow or /etc/sudoers. bash_1 runs as root in its
  container, so its tests administer users there too.
- bash_2 / bash_3: a script calls `sudo`; their containers run the script as user `test` with
  passwordless sudo (the sysadmin mode runs them as root, where sudo works too; the user `test`
  is declared there, uid 1000 with sudo rights, owning /home/test). bash_1's container has no
  sudo, so there `sudo` alone does not count.

The reason is kept in item.meta["sysadmin"]; every other test gets `fixture` as its base.

gold carries both: FEH's fields (command, fixture, workdir, prerequisite, script_path, run) and
the check for the `bash-tests` verifier (check, check_files, check_runs_candidate).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite

SUITES = ("bash_1", "bash_2", "bash_3")
SUITE_KIND = {"bash_1": "basic", "bash_2": "system", "bash_3": "multi-line scripts"}
# The driver a bash_2/bash_3 test runs when it ships no test.sh of its own.
DEFAULT_DRIVER = "#!/bin/bash\n#\n# Test driver\n#\n. pre_test.sh\n(. bash.sh)\n. post_test.sh\n"
EMPTY_HOOK = "#!/bin/bash\n"
# bash_2/bash_3 containers run the script as `test`, with passwordless sudo (uid as `useradd -m` gives it)
CONTAINER_USERS = ({"name": "test", "uid": 1000, "sudo": True},)
# Programs that change (or read the secrets of) the system's users and groups.
ADMIN_COMMANDS = ("useradd", "adduser", "usermod", "userdel", "deluser", "groupadd", "addgroup", "groupmod",
                  "groupdel", "delgroup", "gpasswd", "passwd", "chpasswd", "chgpasswd", "chage", "chsh",
                  "chfn", "newusers", "vipw", "vigr", "visudo", "pwck", "grpck")
_WORD = r"(?<![\w./-])({})(?![\w.-])"  # a command word, not part of a path or a longer name
_ADMIN_RE = re.compile(_WORD.format("|".join(ADMIN_COMMANDS)) + r"|(/etc/(?:g?shadow|sudoers))\b")
_SUDO_RE = re.compile(_WORD.format("sudo"))
_COMMENT = re.compile(r"(?:^|(?<=\s))#.*$", re.MULTILINE)  # a word starting with # to the line's end
_READ_ONLY = re.compile(r"\bgetent\s+(?:passwd|group)\b")  # reads what every fixture has
_SCRIPT_CALL = re.compile(r"(?:^|[\s(;&|])(?:\.|source|bash|sh)?\s*(?:\./)?bash\.sh\b([^\n;|&)]*)", re.MULTILINE)


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _read(p: Path, what: str, required: bool = True) -> str | None:
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise InputError(f"missing {what}", path=str(p), expected=f"a `{p.name}` file") from None
        return None
    except UnicodeDecodeError as e:
        raise InputError(f"{what} is not UTF-8 (byte {e.start})", path=str(p), line=1) from None
    if required and not text.strip():
        raise InputError(f"{what} is empty", path=str(p), line=1, field=p.name, expected="non-empty text")
    return text


def load_eabench(path: str | Path, suites: tuple[str, ...] | None = None, *, strict: bool = False,
                 fixture: str = "empty", admin_fixture: str | None = "sysadmin") -> Suite:
    """All tests of the chosen suites (default: those present).

    Args:
        path: the repo root, or one suite dir (named bash_N).
        suites: which suites to load.
        strict: raise on a test without `bash.sh` instead of listing it in meta["no_gold"].
        fixture: the base file system each test's own files are added to.
        admin_fixture: the base for tests that administer users and groups (see the module
            docstring), or None to give every test `fixture`.

    Returns:
        The suite; each item's gold names a fixture registered for that test.
    """
    root = Path(path)
    if not root.is_dir():
        raise InputError("NL2Bash-EAbench dir not found", path=str(root),
                         expected="the repo root holding bash_1/ bash_2/ bash_3/")
    if root.name in SUITES:
        root, present = root.parent, [root.name]
    else:
        present = [s for s in SUITES if (root / s).is_dir()]
    if suites is not None:
        unknown = [s for s in suites if s not in SUITES]
        if unknown:
            raise InputError(f"unknown suite {unknown[0]!r}", field="suites", expected=", ".join(SUITES))
        missing = [s for s in suites if s not in present]
        if missing:
            raise InputError(f"suite {missing[0]} not found", path=str(root / missing[0]),
                             expected="a directory per suite")
        present = list(suites)
    if not present:
        raise InputError("no suite dirs", path=str(root), expected="bash_1/, bash_2/ or bash_3/")
    items: list[Item] = []
    no_gold: list[str] = []
    for s in present:
        for t in sorted((d for d in (root / s).iterdir() if d.is_dir()), key=lambda d: _natural(d.name)):
            has_prompt, has_gold = (t / "prompt").exists(), (t / "bash.sh").exists()
            if not has_prompt:
                if has_gold:
                    raise InputError("test has bash.sh but no prompt", path=str(t / "prompt"),
                                     expected="a `prompt` file with the task text")
                continue
            iid = f"eabench-{s}-{t.name}"
            if not has_gold:
                if strict:
                    raise InputError("test has no ground-truth script", path=str(t / "bash.sh"),
                                     expected="a `bash.sh` file")
                no_gold.append(iid)
                continue
            items.append(_item(iid, s, t, fixture, admin_fixture))
    return Suite("nl2bash-eabench", items, description="NL2Bash-EAbench (IBM)",
                 meta={"source": str(root), "suites": present, "no_gold": no_gold})


def _item(iid: str, suite: str, t: Path, base: str, admin_base: str | None) -> Item:
    prompt = _read(t / "prompt", "prompt").strip()
    script = _read(t / "bash.sh", "bash.sh")
    name = _read(t / "name", "name", required=False)
    meta = {"suite": suite, "kind": SUITE_KIND[suite], "path": str(t)}
    if name and name.strip():
        meta["name"] = name.strip()
    why = administers(suite, t, script) if admin_base else None
    if why:
        meta["sysadmin"] = why
        base = admin_base
    gold = {"command": script, "suite": suite}
    gold.update(_basic(iid, t, base) if suite == "bash_1" else _system(iid, suite, t, base, meta))
    return Item(id=iid, inputs={"task": prompt}, gold=gold, group=iid, meta=meta)


def administers(suite: str, t: Path, script: str) -> str | None:
    """Why a test needs the sysadmin mode (the first admin command or file its scripts name), or
    None. See the module docstring for the rule.

    Args:
        suite: bash_1, bash_2 or bash_3.
        t: the test directory.
        script: the test's bash.sh.
    """
    setup = ("prerequisite.sh",) if suite == "bash_1" else tuple(f"home/test/{h}" for h in
                                                                 ("pre_test.sh", "test.sh", "post_test.sh"))
    for label, text in (("bash.sh", script), *((f, _read(t / f, f, required=False)) for f in setup)):
        if not text:
            continue
        code = _READ_ONLY.sub("", _COMMENT.sub("", text))
        m = _ADMIN_RE.search(code) or (_SUDO_RE.search(code) if suite != "bash_1" else None)
        if m:
            return f"{label} {'names' if m.group(0).startswith('/') else 'runs'} {m.group(0)}"
    return None


def _fixture_name(iid: str, t: Path) -> str:
    """A fixture name per test directory: two checkouts of the benchmark never share one."""
    return f"{iid}-{hashlib.sha256(str(t.resolve()).encode()).hexdigest()[:8]}"


def _basic(iid: str, t: Path, base: str) -> dict:
    """bash_1: files at /app, prerequisite.sh first, the script as /app/testN.sh; check test.py."""
    from verifirst.verifiers.bash import fixtures

    spec = {"src": str(t), "dest": "/app", "base": base, "exclude": ["prompt", "name", "bash.sh"]}
    fx = fixtures.from_spec(_fixture_name(iid, t), spec)
    gold = {"fixture": fx.name, "fixture_spec": spec, "workdir": "/app", "script_path": f"/app/{t.name}.sh",
            "run": f"bash {t.name}.sh"}
    pre = _read(t / "prerequisite.sh", "prerequisite.sh", required=False)
    if pre is not None and pre.strip():
        gold["prerequisite"] = pre
    if (t / "test.py").is_file():
        gold["check"] = _basic_check(t.name)
        gold["check_runs_candidate"] = True  # test.py runs `bash testN.sh` itself
    return gold


def _basic_check(test: str) -> str:
    """Run the test's test.py in /app and turn its results JSON into an exit status
    (0 Pass, 1 Fail, 125 no result: the check could not judge)."""
    return (f"mkdir -p output\n"
            f"python3 test.py || {{ echo \"test.py failed (exit $?)\" >&2; exit 125; }}\n"
            f"python3 - output/results_{test}.json <<'VERIFIRST_PY'\n"
            "import json, sys\n"
            "try:\n"
            "    r = json.load(open(sys.argv[1]))\n"
            "except (OSError, ValueError) as e:\n"
            "    print(f'test.py wrote no result: {e}', file=sys.stderr)\n"
            "    sys.exit(125)\n"
            "print(f\"result {r.get('result')} (script exit {r.get('returncode')})\")\n"
            "print('stdout: ' + str(r.get('stdout', '')).rstrip()[:2000])\n"
            "print('stderr: ' + str(r.get('stderr', '')).rstrip()[:2000])\n"
            "sys.exit(0 if r.get('result') == 'Pass' else 1)\n"
            "VERIFIRST_PY\n")


def _system(iid: str, suite: str, t: Path, base: str, meta: dict) -> dict:
    """bash_2/bash_3: the home/ tree at /home, the script as /home/test/bash.sh run by test.sh;
    check evaluate.sh with the suite's bin/ helpers."""
    from verifirst.verifiers.bash import fixtures

    home = t / "home" / "test"
    extra: dict = {}
    driver = _read(home / "test.sh", "test.sh", required=False)
    if driver is None:
        driver = DEFAULT_DRIVER
        extra["/home/test/test.sh"] = {"content": DEFAULT_DRIVER, "mode": 0o755}
        for hook in ("pre_test.sh", "post_test.sh"):
            if not (home / hook).exists():
                extra[f"/home/test/{hook}"] = {"content": EMPTY_HOOK, "mode": 0o755}
    if (t / "home").is_dir():
        spec = {"src": str(t / "home"), "dest": "/home", "base": base, "extra": extra}
    else:
        spec = {"files": {"/home/test/": {"dir": True, "mode": 0o755}, **extra}, "base": base}
    if "sysadmin" in meta:  # the container's user: `usermod ... test`, `sudo -u test`, `su test` find it
        spec["users"] = list(CONTAINER_USERS)
    fx = fixtures.from_spec(_fixture_name(iid, t), spec)
    meta["arguments"] = [a.strip() for a in _SCRIPT_CALL.findall(driver) if a.strip()]
    unsupported = [f for f in ("prologue.sh", "epilogue.sh", "podman.opts") if (t / f).exists()]
    if unsupported:
        meta["unsupported"] = unsupported  # container-side hooks the sandbox does not replay
    gold = {"fixture": fx.name, "workdir": "/home/test", "script_path": "/home/test/bash.sh",
            "run": "bash ./test.sh", "fixture_spec": spec}
    evaluate = _read(t / "evaluate.sh", "evaluate.sh", required=False)
    if evaluate is not None and evaluate.strip():
        files = {"evaluate.sh": evaluate}
        bin_dir = t.parent / "bin"
        if bin_dir.is_dir():
            for f in sorted(bin_dir.iterdir()):
                if f.is_file() and f.suffix == ".sh":
                    files[f"bin/{f.name}"] = _read(f, f.name, required=False) or ""
        gold["check"] = _system_check(t.name, suite)
        gold["check_files"] = files
    return gold


def _system_check(test: str, suite: str) -> str:
    """evaluate.sh on a work dir laid out as the benchmark's harness leaves it: podman.log (the
    run's stdout and stderr, one ` stdout F `/` stderr F ` line each), empty diff.log and home.log,
    and home/ (the sandbox's /home)."""
    return ('W="$VERIFIRST_CHECK_DIR/work"\nmkdir -p "$W" && ln -s /home "$W/home"\n'
            'sed -e "s+^+ stdout F +" "$VERIFIRST_STDOUT" > "$W/podman.log"\n'
            'sed -e "s+^+ stderr F +" "$VERIFIRST_STDERR" >> "$W/podman.log"\n'
            ': > "$W/diff.log"; : > "$W/home.log"\n'
            f'PATH="$VERIFIRST_CHECK_DIR/bin:$PATH" bash "$VERIFIRST_CHECK_DIR/evaluate.sh" {test} {suite} "$W"\n')
