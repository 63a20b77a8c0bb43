"""Users a fixture declares (issue 37): the image's accounts (a user `test` with sudo rights, one
at a given uid) exist in the run, own their homes, and bad declarations are refused by field."""
from __future__ import annotations

import os

import pytest

from verifirst.core.errors import InputError
from verifirst.verifiers.bash import fixtures
from verifirst.verifiers.bash._accounts import parse_users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="declared uids need the sysadmin namespace (root)")


def _sandbox():
    from verifirst.verifiers.bash.sandbox import Sandbox

    try:
        return Sandbox(timeout_s=10)
    except Exception as e:  # no user namespaces here
        pytest.skip(f"sandbox unavailable: {e}")


def test_a_task_that_needs_user_test_with_sudo_and_a_user_at_a_given_uid():
    fx = fixtures.from_spec("users-issue37", {"files": {"/home/test/notes.txt": "hi"},
                                              "users": [{"name": "test", "uid": 1000, "sudo": True},
                                                        {"name": "snoopy", "uid": 2001}]})
    assert fx.sysadmin
    r = _sandbox().run("id -u test; id -u snoopy; stat -c '%u %n' /home/test /home/test/notes.txt /home/snoopy; "
                       "sudo -u test whoami; su test -c 'touch ~/made' && stat -c %u /home/test/made; "
                       "usermod -aG adm test && id -nG test; sudo -l -U test | tail -1", fx)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["1000", "2001", "1000 /home/test", "1000 /home/test/notes.txt",
                                     "2001 /home/snoopy", "test", "1000", "test adm",
                                     "    (ALL : ALL) NOPASSWD: ALL"]
    assert "/home/test/made" in {e["path"] for e in r.fs_diff.added}
    plain = _sandbox().run("id test", fixtures.custom("no-users-issue37", {"/home/test/": {"dir": True}}))
    assert plain.exit_code == 1 and "no such user" in plain.stderr  # nothing declared, nothing there


def test_bad_declarations_name_the_entry_and_key():
    for spec, field in [([{"name": "Test!", "uid": 1000}], "users[0].name"),
                        ([{"name": "a", "uid": 0}], "users[0].uid"),
                        ([{"name": "a", "uid": 70000}], "users[0].uid"),
                        ([{"name": "a", "uid": 1000}, {"name": "a", "uid": 1001}], "users[1].name"),
                        ([{"name": "a", "uid": 1000, "home": "rel/x"}], "users[0].home"),
                        ([{"name": "a", "uid": 1000, "password": "x"}], "users[0]"),
                        ({"name": "a"}, "users")]:
        with pytest.raises(InputError) as e:
            parse_users(spec)
        assert e.value.field == field, (spec, e.value.field)


def test_an_eabench_test_that_administers_users_finds_the_container_user_test(tmp_path):
    """`usermod: user 'test' does not exist` and `sudo: unknown user test` (issue 37): a bash_2 test
    that administers users runs in sysadmin mode with the container's user `test` declared."""
    import shutil
    from pathlib import Path

    from verifirst.benchmarks.eabench import load_eabench
    from verifirst.verifiers.bash.oracle import BashTestsVerifier

    tiny = Path(__file__).resolve().parent / "data" / "eabench_tiny"
    root = tmp_path / "ea"
    shutil.copytree(tiny / "bash_2", root / "bash_2", symlinks=True)
    t = root / "bash_2" / "test1"
    (t / "bash.sh").write_text("groupadd -f devs && usermod -aG devs test && sudo -u test id -nG\n")
    it = load_eabench(root).by_id()["eabench-bash_2-test1"]
    assert it.meta["sysadmin"].startswith("bash.sh runs") and fixtures.resolve(it.gold["fixture"]).users
    r = _sandbox().run(it.gold["command"] + "stat -c %U /home/test", it.gold["fixture"])
    assert r.exit_code == 0 and r.stdout.split() == ["test", "devs", "test"], r.stderr
    assert BashTestsVerifier(timeout_s=10).verify(it, it.gold["command"]).stage in ("PASS", "CHECK")
