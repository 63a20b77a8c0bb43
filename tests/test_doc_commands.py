"""Every command the README and the journey pages show runs to its end, under a memory ceiling.

The commands are read from the pages themselves: each line of a fenced shell block (bash, sh,
console, or no language) that starts with `verifirst`, `make` or `python` (a `\\` continues it on
the next line; a trailing `# comment` is dropped). A command shown on two pages runs once (the
first page in PAGES). Each runs with bash in one scratch directory shared by the whole module
(a copy of `examples/`, and `../shared` linked to the checkout's), so a later command sees what
an earlier one wrote, as a reader following the pages would.

Memory ceiling: MEMORY_CEILING_BYTES (4 GiB) for the command's whole process tree. Where this
process may make a memory cgroup (cgroup v1 `memory` or v2 `memory.max`; as root) the command runs
in one with that limit, so the kernel stops it there and nothing else on the machine is touched;
elsewhere a watchdog samples the tree's resident memory every 0.2 s and kills the tree past it.
Either way the test fails naming the ceiling, and each command's peak resident memory (the tree's,
sampled) and wall time are printed (`pytest -s`).

What a page needs from this test goes in an HTML comment just before its fenced block (invisible
in the rendered page), one directive a line, each naming a part of the command it applies to:

    <!-- doc-test
    skip verifirst ui :: a server: serves until stopped (tests/test_mlflow_ui_browser.py drives it)
    add verifirst run examples/iac_gepa.toml :: --max-lm-calls 30
    integration verifirst run :: the embedded model, minutes on 2 cores
    setup verify bash --check :: printf 'test "$(cat answer.txt)" = 42\\n' > tests.sh
    -->

`skip` never runs it and says why (a network, a paid model, your own data, a server);
`add` appends arguments (the small limits the test runs it with); `integration` marks it
`integration` (the embedded model); `setup` runs shell lines before it in the same directory.
The README cannot carry comments of its own (it is held to 200 lines): its commands are the
journey pages' and run there, and test_every_readme_command_is_covered says so.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("docs/getting-started.md", "docs/journeys/calibrate.md", "docs/journeys/iac.md",
         "docs/journeys/inspect.md", "README.md")
PREFIXES = ("verifirst", "make", "python")
SHELL_LANGS = ("", "bash", "sh", "shell", "console")
MEMORY_CEILING_BYTES = 4 * 2**30
COMMAND_TIMEOUT_S = 1800
KINDS = ("skip", "add", "integration", "setup")


@dataclass
class DocCommand:
    page: str
    line: int
    text: str
    marks: dict = field(default_factory=dict)  # kind -> value, for the directives naming this command

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _strip_comment(line: str) -> str:
    """The line without a trailing shell comment (a # after a blank, outside quotes)."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip()
    return line.rstrip()


def _directives(comment: str) -> list[tuple[str, str, str]]:
    """(kind, part of the command, value) from a `<!-- doc-test ... -->` comment."""
    out = []
    for raw in comment.splitlines():
        m = re.match(rf"\s*({'|'.join(KINDS)})\s+(.+?)\s*::\s*(.*)$", raw)
        if m:
            out.append((m.group(1), m.group(2), m.group(3).strip()))
    return out


def extract(page: str) -> list[DocCommand]:
    """The commands a page shows, with the directives of the comment before their block.

    Args:
        page: the page's path relative to the checkout.
    """
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    out: list[DocCommand] = []
    pending: list = []
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.strip().startswith("<!-- doc-test"):
            end = k
            while "-->" not in lines[end]:
                end += 1
            pending = _directives("\n".join(lines[k:end + 1]))
            k = end + 1
            continue
        fence = re.match(r"^\s*```\s*(\w*)\s*$", line)
        if not fence:
            k += 1
            continue
        lang, k = fence.group(1), k + 1
        body_start = k
        while k < len(lines) and not re.match(r"^\s*```\s*$", lines[k]):
            k += 1
        body = lines[body_start:k]
        k += 1
        if lang in SHELL_LANGS:
            j = 0
            while j < len(body):
                start, text = j, body[j]
                while text.rstrip().endswith("\\") and j + 1 < len(body):
                    j += 1
                    text = text.rstrip()[:-1] + " " + body[j].strip()
                j += 1
                text = _strip_comment(re.sub(r"^\s*\$\s+", "", text)).strip()
                if text.split(" ", 1)[0] in PREFIXES:
                    marks = {}
                    for kind, part, value in pending:
                        if part in text and kind not in marks:
                            marks[kind] = value
                    out.append(DocCommand(page, body_start + start + 1, " ".join(text.split()), marks))
        pending = []
    return out


def all_commands() -> tuple[list[DocCommand], dict[str, str]]:
    """The commands to run (each text once) and, for each repeat, where it runs."""
    first: dict[str, DocCommand] = {}
    repeats: dict[str, str] = {}
    for page in PAGES:
        for c in extract(page):
            if c.text in first:
                repeats[c.id] = first[c.text].id
            else:
                first[c.text] = c
    return list(first.values()), repeats


COMMANDS, REPEATS = all_commands()


# -- the memory ceiling ---------------------------------------------------------------------------

def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack += children.get(p, [])
    return out


def _rss(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
    return total


def memory_cgroup(name: str, limit: int) -> Path | None:
    """A memory cgroup with `limit` bytes (v1 or v2), or None where this process may not make one."""
    v1 = Path("/sys/fs/cgroup/memory")
    v2 = Path("/sys/fs/cgroup")
    try:
        if (v1 / "memory.limit_in_bytes").exists():
            d = v1 / name
            d.mkdir(exist_ok=True)
            (d / "memory.limit_in_bytes").write_text(str(limit))
            return d
        if "memory" in (v2 / "cgroup.controllers").read_text().split():
            d = v2 / name
            d.mkdir(exist_ok=True)
            (d / "memory.max").write_text(str(limit))
            (d / "memory.swap.max").write_text("0")
            return d
    except OSError:
        return None
    return None


def _kill_members(group: Path | None) -> None:
    """Kill what is left in the command's cgroup (a process that started a session of its own)."""
    if group is None:
        return
    try:
        pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (group / "cgroup.procs").read_text().split():
        time.sleep(0.1)


@dataclass
class Outcome:
    rc: int
    output: str
    peak_rss: int
    wall_s: float
    ceiling: str  # how the ceiling was held: "cgroup PATH" or "watchdog"
    over: bool = False


def run_bounded(script: str, cwd: Path, env: dict, ceiling: int = MEMORY_CEILING_BYTES,
                timeout_s: float = COMMAND_TIMEOUT_S) -> Outcome:
    """Run `script` with bash in `cwd` under the memory ceiling; its peak tree RSS and wall time.

    Args:
        script: bash lines.
        cwd: where it runs.
        env: its environment.
        ceiling: bytes of memory for the whole process tree.
        timeout_s: wall seconds before it is killed.
    """
    group = memory_cgroup(f"verifirst-doc-{os.getpid()}-{time.monotonic_ns()}", ceiling)
    join = f"echo $$ > {group}/cgroup.procs\n" if group else ""
    log = cwd.parent / "command.log"
    t0 = time.monotonic()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(["bash", "-c", join + "set -e\n" + script], cwd=cwd, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        peak, over = 0, False
        try:
            while proc.poll() is None:
                rss = _rss(_tree(proc.pid))
                peak = max(peak, rss)
                if rss > ceiling or time.monotonic() - t0 > timeout_s:
                    over = rss > ceiling
                    break
                time.sleep(0.2)
        finally:  # past the ceiling or the time, or this test interrupted: nothing of it is left running
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            _kill_members(group)
    oom = False
    if group is not None:
        for name in ("memory.failcnt", "memory.events"):
            f = group / name
            if f.exists():
                text = f.read_text()
                oom = (int(text) > 0) if name == "memory.failcnt" else bool(re.search(r"oom_kill [1-9]", text))
                break
        try:
            group.rmdir()
        except OSError:
            pass
    return Outcome(proc.returncode, log.read_text(errors="replace"), peak, time.monotonic() - t0,
                   f"cgroup {group}" if group else "watchdog", over or (oom and proc.returncode != 0))


# -- the tests ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A directory as a reader's checkout would look from the pages: examples/ and ../shared."""
    base = tmp_path_factory.mktemp("doc-commands")
    work = base / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    shared = ROOT.parent / "shared"
    if shared.exists():
        (base / "shared").symlink_to(shared)
    return work


def _param(c: DocCommand):
    marks = []
    if "skip" in c.marks:
        marks.append(pytest.mark.skip(reason=f"{c.id}: {c.marks['skip']}"))
    if "integration" in c.marks:
        marks.append(pytest.mark.integration)
    return pytest.param(c, id=c.id, marks=marks)


@pytest.mark.timeout(COMMAND_TIMEOUT_S + 120)  # the command's own limit ends it first
@pytest.mark.parametrize("cmd", [_param(c) for c in COMMANDS])
def test_documented_command_runs_to_its_end(cmd: DocCommand, scratch: Path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CI": "1", "VERIFIRST_TESTS": str(ROOT / "tests")}
    text = cmd.text + (f" {cmd.marks['add']}" if "add" in cmd.marks else "")
    script = (cmd.marks.get("setup", "") + "\n" + text).strip()
    out = run_bounded(script, scratch, env)
    print(f"\n{cmd.id}: {text}\n  rc {out.rc}, peak RSS {out.peak_rss / 2**20:.0f} MiB, {out.wall_s:.1f} s, "
          f"ceiling {MEMORY_CEILING_BYTES / 2**30:.0f} GiB by {out.ceiling}")
    assert not out.over, (f"{cmd.id}: `{text}` went past the {MEMORY_CEILING_BYTES / 2**30:.0f} GiB memory "
                          f"ceiling ({out.ceiling}; peak {out.peak_rss / 2**20:.0f} MiB)")
    assert out.rc == 0, f"{cmd.id}: `{text}` exited {out.rc}:\n{out.output[-3000:]}"
    assert "Traceback (most recent call last)" not in out.output, out.output[-3000:]


def test_every_readme_command_is_covered():
    readme = extract("README.md")
    assert readme, "the README shows commands"
    for c in readme:
        assert c.id in REPEATS or c in COMMANDS, c.id
        assert c.id not in REPEATS or not REPEATS[c.id].startswith("README"), c.id


def test_extraction_reads_blocks_continuations_comments_and_directives(tmp_path, monkeypatch):
    page = tmp_path / "p.md"
    page.write_text("Intro `verifirst inline` is not a block.\n\n"
                    "<!-- doc-test\nskip verifirst ui :: a server\nadd calibrate :: --limit 8\n-->\n"
                    "```bash\nverifirst ui   # http://127.0.0.1:5000\n"
                    "verifirst calibrate --outcomes a.jsonl \\\n    --view 'x # y' --max-iters 2\n"
                    "pip install verifirst\n```\n\n```python\nimport verifirst\n```\n\n"
                    "```bash\nmake demo\n$ python tool.py --n 3\n```\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    got = [(c.line, c.text, c.marks) for c in extract("p.md")]
    assert got == [
        (8, "verifirst ui", {"skip": "a server"}),
        (9, "verifirst calibrate --outcomes a.jsonl --view 'x # y' --max-iters 2", {"add": "--limit 8"}),
        (19, "make demo", {}),
        (20, "python tool.py --n 3", {}),
    ]


def test_the_ceiling_stops_a_command_that_grows_past_it(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    grow = f"{sys.executable} -c 'import time; b = bytearray(400 * 2**20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(5)'"
    out = run_bounded(grow, work, dict(os.environ), ceiling=128 * 2**20, timeout_s=120)
    assert out.over and out.rc != 0, out
    if out.ceiling.startswith("cgroup"):  # the kernel stops it on its way up (a watchdog may see it whole)
        assert out.peak_rss < 400 * 2**20
    small = run_bounded(f"{sys.executable} -c 'print(1)'", work, dict(os.environ), ceiling=128 * 2**20, timeout_s=120)
    assert not small.over and small.rc == 0 and small.output.strip() == "1"
