"""`verifirst bench NAME` says how its study goes when stdout is not a terminal (a log file, CI): a line
when it starts, one a minute with the LM calls made so far, one when it ends; stdout keeps the study's
own output whole; `-q` silences the lines."""
import json

import pytest
from typer.testing import CliRunner

from verifirst.cli import app
from verifirst.core import registry
from verifirst.lm.testing import scripted_lm
from verifirst.report import progress
from verifirst.report.progress import StudyLines


def tiny_study(argv):
    """A study that asks a scripted LM twice and prints one JSON document."""
    lm = scripted_lm(lambda m: "ok")
    for _ in range(2):
        lm("hello")
    print(json.dumps({"argv": argv}))
    return 3 if "--fail" in argv else 0


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(registry.STUDIES, "tiny-study", registry.Entry("", "a test study", obj=tiny_study))
    monkeypatch.setattr(progress, "_QUIET", [False])
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)


def test_a_piped_bench_says_started_and_done_with_its_calls(tiny):
    r = CliRunner().invoke(app, ["bench", "tiny-study", "--fail"])
    assert r.exit_code == 3, r.output
    assert json.loads(r.stdout) == {"argv": ["--fail"]}  # the study's document, no progress line in it
    lines = r.stderr.strip().splitlines()
    assert lines[0].endswith("bench tiny-study: started")
    assert lines[-1].split("] ", 1)[1].startswith("bench tiny-study: done, exit 3, 2 LM call(s)")


def test_dash_q_prints_no_bench_lines(tiny):
    r = CliRunner().invoke(app, ["-q", "bench", "tiny-study"])
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and json.loads(r.stdout) == {"argv": []}


def test_a_heartbeat_line_counts_the_calls_so_far():
    said = []
    t = [0.0]
    lines = StudyLines("slow", said.append, heartbeat_s=3600, clock=lambda: t[0])
    with lines:
        lm = scripted_lm(lambda m: "ok")
        lm("one")
        t[0] = 61.0
        lines.tick()  # what the heartbeat thread says each heartbeat_s
        lines.rc = 0
    assert said[1] == "[    61s] bench slow: running, 1 LM call(s)"
    assert said[-1] == "[    61s] bench slow: done, exit 0, 1 LM call(s) (61 s)"


def test_a_study_that_exits_through_argparse_ends_with_its_code():
    said = []
    with pytest.raises(SystemExit):
        with StudyLines("argv", said.append):
            raise SystemExit(2)
    assert said[-1].split("] ", 1)[1].startswith("bench argv: done, exit 2")
