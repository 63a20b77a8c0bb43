"""bash -n and shellcheck gates: verdicts, messages with lines, batching, bad input."""
from __future__ import annotations

import pytest

from verifirst.core.errors import InputError
from verifirst.core.task import Item
from verifirst.verifiers.base import Verifier
from verifirst.verifiers.bash.shell_gates import BashSyntaxGate, ShellcheckGate

ITEM = Item(id="t1", inputs={"query": "q"})
VALID_BASH = [
    "time ls",
    "echo $(( 1 + 2 ))",
    "[[ -f /etc/passwd ]] && echo yes",
    "case $x in a) echo a;; *) echo other;; esac",
    "arr=(a b c); echo ${arr[1]}",
    "for f in *.txt; do\n  wc -l \"$f\"\ndone",
]


def test_syntax_gate_accepts_valid_bash_and_is_a_verifier():
    gate = BashSyntaxGate()
    assert isinstance(gate, Verifier)
    verdicts = gate.verify_many(VALID_BASH)
    assert [v.passed for v in verdicts] == [True] * len(VALID_BASH)
    assert all(v.stage == "PASS" and v.score == 1.0 and v.backend == "bash -n" for v in verdicts)


def test_syntax_gate_rejects_with_line_and_message():
    v = BashSyntaxGate().verify(ITEM, "if true; then\n  echo x\n")
    assert not v.passed and v.stage == "SYNTAX" and v.score == 0.0
    assert v.errors[0].cls == "bash_syntax"
    assert any(e.address and e.address.startswith("line ") for e in v.errors)
    assert "unexpected end of file" in v.feedback
    v = BashSyntaxGate().verify(ITEM, "echo a )")
    assert not v.passed and "`)'" in v.feedback


def test_syntax_gate_never_executes():
    v = BashSyntaxGate().verify(ITEM, "touch /tmp/verifirst-must-not-exist-5521")
    import os
    assert v.passed and not os.path.exists("/tmp/verifirst-must-not-exist-5521")


def test_shellcheck_batches_and_maps_findings():
    gate = ShellcheckGate(severity="warning")
    scripts = ["echo ok", 'for f in $(ls); do echo "$f"; done', "cd /tmp\nrm -rf $dir/"]
    verdicts = gate.verify_many(scripts)
    assert verdicts[0].passed and verdicts[0].stage == "PASS"
    assert not verdicts[1].passed and "SC2045" in verdicts[1].error_classes
    assert not verdicts[2].passed and verdicts[2].stage == "LINT"
    assert verdicts[2].errors[0].address.startswith("line ")
    assert "SC" in verdicts[2].feedback


def test_shellcheck_severity_threshold_and_exclusions():
    quoted_issue = "echo $1"  # SC2086 is info level
    assert ShellcheckGate(severity="error").verify(ITEM, quoted_issue).passed
    v = ShellcheckGate(severity="info").verify(ITEM, quoted_issue)
    assert not v.passed and v.error_classes == ["SC2086"]
    assert ShellcheckGate(severity="info", exclude=["SC2086"]).verify(ITEM, quoted_issue).passed


def test_gates_reject_bad_input():
    with pytest.raises(InputError, match="NUL"):
        BashSyntaxGate().verify(ITEM, "echo \0")
    with pytest.raises(InputError, match="string"):
        ShellcheckGate().verify(ITEM, 42)
    with pytest.raises(InputError, match="severity"):
        ShellcheckGate(severity="fatal")
