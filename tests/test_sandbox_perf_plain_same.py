"""The sandbox benchmark's same-work baseline runs the task's own commands on its own fixture copy:
absolute paths into the fixture's top-level directories go to the copy, the host's stay; and its
helper runs them at another uid, with no network, and reports every task."""
from __future__ import annotations

import os

import pytest

from verifirst.benchmarks.perf.plain_same import PlainSame, _rewrite


def test_fixture_paths_are_rewritten_to_the_copy_and_host_paths_are_not():
    got = _rewrite("find /testbed -name x | xargs cat /testbed/a /etc/passwd /testbedx ./testbed; ls /system/f",
                   {"testbed", "system"}, "/dev/shm/C")
    assert got == ("find /dev/shm/C/testbed -name x | xargs cat /dev/shm/C/testbed/a /etc/passwd /testbedx "
                   "./testbed; ls /dev/shm/C/system/f")


@pytest.mark.skipif(os.geteuid() != 0, reason="the helper drops to another uid as root only")
def test_the_helper_runs_each_task_on_a_fresh_copy_as_another_uid_without_network():
    tasks = [{"fixture": "nl2sh-fs1", "gold": "test -f /testbed/hello.php && touch /testbed/new && test $(id -u) -ne 0",
              "gold2": "test ! -e /testbed/new && test $(grep -c : /proc/net/dev) -eq 1"}]  # lo only
    helper = PlainSame.start(tasks, 5.0)
    try:
        (total, in_bash, codes), = helper.round()
    finally:
        helper.close()
    assert codes == [0, 0] and total >= in_bash > 0
