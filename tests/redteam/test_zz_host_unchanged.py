"""After every attack of the suite (named zz so it runs last): the host's /etc, the user's keys
and another run's files are as they were before the suite, and no process of the suite's uids
is left."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import procs_of_uid

from .conftest import MODES, OTHER_RUN, TOKEN, canary_tree, etc_hashes, mode_uid, user_keys

pytestmark = pytest.mark.security


def _procs_of(uids: set[int]) -> list[int]:
    return [p for u in sorted(uids) for p in procs_of_uid(u)]


def test_host_unchanged_across_the_suite(batteries, host_snapshot):
    before, now = host_snapshot["etc"], etc_hashes()
    changed = sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p))
    with_token = []
    for p in changed:
        try:
            if TOKEN.encode() in Path(p).read_bytes() or TOKEN in p:
                with_token.append(p)
        except OSError:
            pass
    assert with_token == [], f"the suite's attacks reached the host's /etc: {with_token}"
    dpkg = Path("/var/lib/dpkg/status")
    if (dpkg.stat().st_mtime if dpkg.exists() else None) == host_snapshot["dpkg"]:
        assert changed == [], f"the host's /etc changed during the suite: {changed[:20]}"
    deadline = time.time() + 3  # keys a finished run held are collected by the kernel a moment later
    while user_keys() != host_snapshot["keys"] and time.time() < deadline:
        time.sleep(0.1)
    assert user_keys() == host_snapshot["keys"], (f"the user's keys changed during the suite: "
                                                  f"{sorted(user_keys() ^ host_snapshot['keys'])[:10]}")
    assert canary_tree(OTHER_RUN) == host_snapshot["canary"], "another run's files changed"
    uids = {mode_uid(m) for m in MODES}
    deadline = time.time() + 3
    while _procs_of(uids) and time.time() < deadline:
        time.sleep(0.1)
    assert _procs_of(uids) == [], "processes of the suite's sandbox uids outlived their runs"
