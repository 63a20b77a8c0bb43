"""Host information a command never needs: host paths (mountinfo, /proc/*/maps, map_files), the
host's /sys (NICs and their MACs, block devices, the cgroup tree), host processes, the kernel
log and the host's key users. Each success condition is a host fact read by the harness outside
the sandbox and found in the candidate's output."""
from __future__ import annotations

import re

import pytest

from .conftest import WITNESS, Attack, attack_ids, check_attack, out, stdout

pytestmark = pytest.mark.security
F = "host-info"


def _scratch(r, c):
    return f"the host scratch path {c.scratch_root!r}" if c.scratch_root and c.scratch_root in out(r) else None


def _words(r) -> set[str]:
    return set(re.findall(r"[\w:./-]+", out(r)))


ATTACKS = [
    Attack("mountinfo_host_paths", F, "/proc/self/mountinfo (or /proc/1/mountinfo, /proc/mounts) shows the host "
           "path of the run's scratch area",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": "cat /proc/self/mountinfo /proc/1/mountinfo /proc/mounts; echo read"},
           _scratch, ran=lambda r, c: "read" in stdout(r)),
    Attack("maps_host_paths", F, "/proc/*/maps or map_files links show host paths (the launcher's or a "
           "preloaded library's place in the scratch area)",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": "cat /proc/[0-9]*/maps 2>/dev/null | awk '{print $6}' | sort -u; "
                       "for l in /proc/[0-9]*/map_files/*; do readlink $l; done 2>/dev/null | sort -u; echo read"},
           _scratch, ran=lambda r, c: "read" in stdout(r)),
    Attack("sys_net_mac", F, "the host's network interfaces and their MAC addresses, read from /sys",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": "ls /sys/class/net; cat /sys/class/net/*/address; echo read"},
           lambda r, c: next((f"host MAC {m}" for m in c.host.get("macs", []) if m in out(r)), None),
           ran=lambda r, c: "read" in stdout(r)),
    Attack("sys_block_devices", F, "the host's block devices, listed from /sys",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": "ls /sys/block /sys/class/block /sys/dev/block; echo read"},
           lambda r, c: next((f"host block device {b}" for b in c.host.get("block", []) if b in _words(r)), None),
           ran=lambda r, c: "read" in stdout(r)),
    Attack("sys_cgroup_tree", F, "the host's cgroup tree (the harness's own cgroup names) seen through /sys/fs/cgroup "
           "or /proc/*/cgroup",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": "cat /proc/self/cgroup /proc/1/cgroup; find /sys/fs/cgroup -maxdepth 3 -type d 2>/dev/null | "
                       "head -300; echo read"},
           lambda r, c: next((f"host cgroup {g}" for g in c.host.get("cgroup", []) if g in out(r)), None),
           ran=lambda r, c: "read" in stdout(r)),
    Attack("host_processes", F, "a host process (the harness's witness, named by prctl) is visible: /proc, "
           "/sys/fs/cgroup/*/cgroup.procs, /proc/sched_debug",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": "cat /proc/[0-9]*/comm /proc/[0-9]*/task/*/comm 2>/dev/null; cat /proc/sched_debug "
                       "/proc/timer_list 2>/dev/null | grep -o 'vfw[a-z0-9]*' | head -3; for f in "
                       "$(find /sys/fs/cgroup -maxdepth 3 -name cgroup.procs 2>/dev/null | head -50); do "
                       "for p in $(cat $f 2>/dev/null); do cat /proc/$p/comm 2>/dev/null; done; done; echo read"},
           lambda r, c: "the host witness process seen" if WITNESS in out(r) else None,
           ran=lambda r, c: "read" in stdout(r)),
    Attack("kernel_log_key_users", F, "the host's kernel log (dmesg, /dev/kmsg) or the host's key users "
           "(/proc/key-users: uids other than the run's own holding keys) can be read",
           {"kind": "run", "sandbox": {"timeout_s": 3},
            "command": "dmesg 2>/dev/null | tail -3 | sed 's/^/KLOG /'; timeout 0.3 head -3 /dev/kmsg 2>/dev/null | "
                       "sed 's/^/KLOG /'; sed 's/^/KEYUSER /' /proc/key-users 2>/dev/null; echo read"},
           lambda r, c: next((ln for ln in stdout(r).splitlines()
                              if ln.startswith("KLOG") or (ln.startswith("KEYUSER") and ln.split()[1] != "0:")), None),
           ran=lambda r, c: "read" in stdout(r)),
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack):
    check_attack(battery, attack)
