"""Controls: a few attacks run again without the sandbox (unsafe_local, as root, in the
root-default battery) must SUCCEED there, which shows their success conditions detect the
break they look for. Only attacks that are harmless on the host are used."""
from __future__ import annotations

from dataclasses import replace

import pytest

from . import test_host_info, test_kernel_objects, test_limits, test_read_gold, test_seccomp
from .conftest import attack_ids

pytestmark = pytest.mark.security

CONTROLS = {"user_session_key": test_kernel_objects, "abstract_socket": test_kernel_objects,
            "memory_many_processes": test_limits, "syscall_perf_event_open": test_seccomp,
            "mountinfo_host_paths": test_host_info, "host_processes": test_host_info,
            "kernel_log_key_users": test_host_info, "environment": test_read_gold,
            "proc_cmdline_environ": test_read_gold}
ATTACKS = [replace(a, id=f"control_{a.id}", spec=dict(a.spec, unsafe=True), modes=("root-default",))
           for name, mod in CONTROLS.items() for a in mod.ATTACKS if a.id == name]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_control_succeeds_without_the_sandbox(battery, attack):
    ctx, results = battery
    if ctx.mode not in attack.modes:
        pytest.skip("controls run once, as root")
    res = results[attack.id]
    assert not res.get("error"), res["error"]
    evidence = attack.succeeded(res, ctx)
    assert evidence, f"{attack.id}: the success condition did not see an attack that works without the sandbox: {res}"
