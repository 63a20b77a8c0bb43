"""Sysadmin mode: user and group administration runs, is judged by its /etc effect, and never
touches the host's /etc."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from verifirst.core.task import Item
from verifirst.verifiers.bash import fixtures
from verifirst.verifiers.bash._sandbox_etc import account_files
from verifirst.verifiers.bash.feh import FehVerifier
from verifirst.verifiers.bash.sandbox import Sandbox

ROOT = os.geteuid() == 0


def etc_checksums() -> dict[str, str]:
    """sha256 of every readable regular file under the host's /etc."""
    sums = {}
    for top, dirs, files in os.walk("/etc"):
        for name in files:
            p = os.path.join(top, name)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                with open(p, "rb") as fh:
                    sums[p] = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                continue
    return sums


HOST_ETC_BEFORE = etc_checksums()  # at import: before any test of this module runs a command


def text_embed(texts):
    """Deterministic stand-in for the model: similar only when equal."""
    v = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        v[i, int(hashlib.sha256(t.encode()).hexdigest(), 16) % 64] = 1.0
    return v


@pytest.fixture(scope="module")
def sb() -> Sandbox:
    return Sandbox(timeout_s=20.0)


@pytest.fixture(scope="module")
def feh() -> FehVerifier:
    return FehVerifier(embed=text_embed, timeout_s=20.0)


def verdict(feh: FehVerifier, gold: str, cand: str):
    item = Item(id="admin", inputs={"task": "administer users"}, gold={"command": gold, "fixture": "sysadmin"})
    return feh.verify(item, cand)


ADMIN_GOLDS = {
    "useradd": "useradd -m alice",
    "gpasswd -r": "groupadd slackers && gpasswd -r slackers",
    "gpasswd -R": "groupadd slackers && gpasswd -R slackers",
    "passwd -l": "useradd carol && passwd -l carol",
}


@pytest.mark.parametrize("name", list(ADMIN_GOLDS))
def test_admin_golds_are_equivalent_to_themselves(feh, name):
    v = verdict(feh, ADMIN_GOLDS[name], ADMIN_GOLDS[name])
    assert v.passed is True, v.feedback
    assert any(e["path"].startswith("/etc/") for e in v.details["gold"]["fs_diff"])


@pytest.mark.parametrize("gold,cand", [
    ("groupadd slackers && gpasswd -r slackers", "groupadd slackers && gpasswd -R slackers"),
    ("useradd -m alice", "useradd -m bob"),
    ("useradd carol && passwd -l carol", "useradd carol"),
    ("useradd -m alice", "useradd alice"),
])
def test_different_admin_commands_are_not_equivalent(feh, gold, cand):
    v = verdict(feh, gold, cand)
    assert v.passed is False, v.feedback
    assert v.details["rule"] in ("fs", "output_presence", "status", "output_cosine"), v.details["rule"]


def test_gpasswd_r_and_R_differ_in_gshadow(sb):
    r, big_r = sb.run_pair(ADMIN_GOLDS["gpasswd -r"], ADMIN_GOLDS["gpasswd -R"], "sysadmin")
    assert r.exit_code == big_r.exit_code == 0, r.stderr + big_r.stderr
    sha = lambda res: {e["path"]: e["sha256"] for e in res.fs_diff.added + res.fs_diff.modified}  # noqa: E731
    assert sha(r)["/etc/gshadow"] != sha(big_r)["/etc/gshadow"]
    assert sha(r)["/etc/group"] == sha(big_r)["/etc/group"]


def test_shadow_files_are_locked_placeholders(sb):
    r = sb.run("stat -c '%a %n' /etc/shadow /etc/gshadow /etc/sudoers; cut -d: -f2 /etc/shadow /etc/gshadow | sort -u",
               "sysadmin")
    lines = r.stdout.splitlines()
    assert lines[:3] == ["640 /etc/shadow", "640 /etc/gshadow", "440 /etc/sudoers"]
    assert set(lines[3:]) <= {"*", "!"}
    files = account_files()
    assert all(line.split(":")[1] in ("*", "!") for line in files["shadow"][0].splitlines())
    assert all(line.split(":")[1] == "x" for line in files["passwd"][0].splitlines())
    host_users = {line.split(":")[0] for line in open("/etc/passwd") if line.count(":") == 6}
    assert host_users <= {line.split(":")[0] for line in files["passwd"][0].splitlines()}


@pytest.mark.skipif(not ROOT, reason="new users' ids need the 65536-id namespace only root can map")
def test_sudo_su_and_home_directories_work(sb):
    r = sb.run("sudo useradd -m -s /bin/bash dave && su dave -c 'id -un; touch ~/made' && sudo -u dave whoami "
               "&& stat -c '%U %a' /home/dave/made && sudo -n true && echo sudo-ok", "sysadmin")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["dave", "dave", "dave 644", "sudo-ok"]
    added = {e["path"] for e in r.fs_diff.added}
    assert {"/home/dave", "/home/dave/made", "/etc/passwd-"} <= added


def test_package_database_is_readable_and_writable(sb):
    r = sb.run("dpkg -s bash | grep -c '^Status: install ok installed'; dpkg -l | grep -c '^ii'; "
               "echo 'Package: vf-fake' >> /var/lib/dpkg/status && echo appended", "sysadmin")
    lines = r.stdout.splitlines()
    assert lines[0] == "1" and int(lines[1]) > 10 and lines[2] == "appended", r.stderr
    assert [e["path"] for e in r.fs_diff.modified] == ["/var/lib/dpkg/status"]


def test_each_run_gets_a_fresh_etc(sb):
    first, second = sb.run("useradd erin && id -u erin", "sysadmin"), sb.run("id erin", "sysadmin")
    assert first.exit_code == 0 and second.exit_code != 0
    assert "no such user" in second.stderr


def test_etc_is_read_only_and_not_diffed_outside_sysadmin_mode(sb):
    r = sb.run("useradd frank; echo rc=$?; touch /etc/x 2>/dev/null; echo rc=$?")
    assert "rc=0" not in r.stdout and r.fs_diff.empty


def test_custom_fixtures_inherit_the_mode():
    fx = fixtures.custom("admin-with-files", {"/srv/users.txt": "gina\nhank\n"}, base="sysadmin")
    assert fx.sysadmin and not fixtures.custom("plain-with-files", {"/srv/a": "x"}).sysadmin
    assert fx.content_hash != fixtures.custom("plain-same", {"/srv/users.txt": "gina\nhank\n"}).content_hash
    r = Sandbox(timeout_s=20.0).run("xargs -n1 useradd < /srv/users.txt && getent passwd gina hank | wc -l", fx)
    assert r.stdout.strip() == "2", r.stderr


def test_unsafe_local_refuses_sysadmin_mode():
    from verifirst.core.errors import InputError

    with pytest.raises(InputError, match="sysadmin mode, which needs the sandbox"):
        Sandbox(unsafe_local=True).run("useradd mallory", "sysadmin")
    assert "mallory" not in open("/etc/passwd").read()


def test_host_etc_unchanged_after_the_sysadmin_cases(sb):
    hostile = ["echo 'evil:x:0:0::/:/bin/sh' >> /etc/passwd; useradd -o -u 0 evil2; passwd -d root; "
               "rm -f /etc/shadow /etc/gshadow; echo pwned > /etc/hostname; chmod 777 /etc; "
               "cp /etc/passwd /etc/shadow; groupdel sudo; echo done",
               "userdel -r ubuntu; gpasswd -a root shadow; visudo -c; sudo sh -c 'echo x > /etc/sudoers'; echo done"]
    for cmd in hostile:
        r = sb.run(cmd, "sysadmin")
        assert r.stdout.endswith("done\n") and any(e["path"].startswith("/etc/") for e in
                                                      r.fs_diff.modified + r.fs_diff.deleted + r.fs_diff.added)
    assert etc_checksums() == HOST_ETC_BEFORE
