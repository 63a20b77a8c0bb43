"""Issue 24, prerequisites and setup effects: a prerequisite without commands runs as nothing,
and the setup's own file-system effect is never taken for the commands' (shared stand-ins:
_feh_testkit)."""
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _feh_testkit import F, bag_embed, run  # noqa: E402
from verifirst.core.task import Item  # noqa: E402
from verifirst.verifiers.bash._feh_compare import RunView  # noqa: E402
from verifirst.verifiers.bash.feh import FehVerifier, with_prerequisite  # noqa: E402


def test_prerequisite_without_commands_runs_as_nothing():
    # it was wrapped as `(\n#!/bin/bash\n\n) >/dev/null 2>&1`, a syntax error failing gold and candidate alike
    for pre in ("#!/bin/bash\n\n", "# only a comment\n", "  \n\t\n", "#!/bin/sh\n  # indented\n"):
        assert with_prerequisite("echo 12345 | rev", pre) == "echo 12345 | rev"
    from verifirst.verifiers.bash.feh import has_commands

    assert not has_commands("#!/bin/bash\n\n")
    assert has_commands("#!/bin/bash\nmkdir d\n")
    assert with_prerequisite("ls d", "#!/bin/bash\nmkdir d\n").startswith("(\n#!/bin/bash\nmkdir d\n\n) >/dev/null 2>&1\n")


def test_setup_effect_is_not_the_commands_effect():
    # the prerequisite creates dir/a and dir/b; the gold only counts, the candidate does nothing:
    # the setup's files must not make them 'the same file-system effect'
    made = [F("/dir", "", "dir"), F("/dir/a"), F("/dir/b")]
    calls = []

    def fake_pair(gold, cand, fixture):
        calls.append((gold, cand))
        if gold == cand:  # the setup alone
            return run("", fs=made), run("", fs=made)
        return run("2\n", fs=made), run("d41d8cd98f00b204e9800998ecf8427e  -\n", fs=made)

    v = FehVerifier("nl2sh", run_pair=fake_pair, embed=bag_embed)
    item = Item("s", {"task": "count files"}, {"command": "find dir -type f | wc -l", "fixture": "empty",
                                                "prerequisite": "mkdir dir; touch dir/a dir/b"})
    r = v.verify(item, "echo -n | md5sum")
    assert r.passed is False and r.details["rule"] != "fs_effect", r.details["rule"]
    assert r.details["gold"]["fs_diff"] == [] and r.details["candidate"]["fs_diff"] == []
    assert calls[1][0] == calls[1][1] and len(calls) == 2
    v.verify(item, "ls dir | wc -l")
    assert len(calls) == 3  # the setup's effect is run once per fixture and prerequisite


def test_relative_to_setup_keeps_changes_and_deletions_of_setup_files():
    from verifirst.verifiers.bash.feh import relative_to_setup

    setup = (("added", "/d", "dir", "0755", ""), ("added", "/d/a", "file", "0644", "aa"))
    deleted_a = RunView(fs=(("added", "/d", "dir", "0755", ""),))
    out = relative_to_setup(deleted_a, setup, "empty")
    assert out.fs == (("deleted", "/d/a", "file", "0644", "aa"),)
    changed = RunView(fs=setup[:1] + (("added", "/d/a", "file", "0644", "bb"), ("added", "/d/n", "file", "0644", "cc")))
    assert relative_to_setup(changed, setup, "empty").fs == (("added", "/d/n", "file", "0644", "cc"),
                                                             ("modified", "/d/a", "file", "0644", "bb"))
    # a fixture file the setup deleted and the command restored is a change of the command
    restored = relative_to_setup(RunView(fs=()), (("deleted", "/root/.bashrc", "file", "0644", "x"),), "empty")
    assert [e[:2] for e in restored.fs] == [("added", "/root/.bashrc")]
    # a file outside the fixture's entries (the sysadmin mode's /etc): setup changed it, the command
    # put it back as it was (useradd alice; userdel alice): a modification, never a deletion
    group = (("modified", "/etc/group", "file", "0644", "with-alice"),)
    back = relative_to_setup(RunView(fs=()), group, "empty")
    assert [e[:2] for e in back.fs] == [("modified", "/etc/group")]
    assert relative_to_setup(RunView(fs=group), group, "empty").fs == ()
    gone = relative_to_setup(RunView(fs=(("deleted", "/etc/group", "file", "0644", "orig"),)), group, "empty")
    assert [e[:2] for e in gone.fs] == [("deleted", "/etc/group")]
