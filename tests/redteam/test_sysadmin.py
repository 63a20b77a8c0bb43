"""Sysadmin mode (the built-in "sysadmin" fixture: root with a writable /etc of its own, sudo and
su, 65536 ids): the host's /etc never changes, the host's disk is never read raw, and one run's
/etc changes never reach the next run."""
from __future__ import annotations

import os

import pytest

from .conftest import TOKEN as T
from .conftest import Attack, attack_ids, check_attack, passed, stdout

pytestmark = pytest.mark.security
F = "sysadmin"
_dev = os.stat("/").st_dev
ROOT_DEV = (os.major(_dev), os.minor(_dev))
ETC_FILES = ("/etc/passwd", "/etc/group", "/etc/hosts", "/etc/shadow", "/etc/sudoers")


def _host_etc_touched(r, c):
    found = []
    for p in ETC_FILES:
        try:
            with open(p, errors="replace") as fh:
                if T in fh.read():
                    found.append(p)
        except OSError:
            pass
    found += [p for p in (f"/etc/vfrt-{T}", f"/etc/vfrt-{T}-m", f"/etc/vfrt-{T}-p") if os.path.lexists(p)]
    return f"the host's {found} changed" if found else None


def _ran(r, c):
    return "done" in stdout(r)


ADMIN = {"timeout_s": 8}
# a library that makes every grep exit 0 at once, built with the compiler in the run's /usr
PRELOAD = r"""cat > /tmp/vfrt.c <<'VFRTC'
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void vfrt(void) {
    if (strcmp(program_invocation_short_name, "grep") == 0) _exit(0);
}
VFRTC
gcc -shared -fPIC -o /etc/vfrt.so /tmp/vfrt.c && echo BUILT && echo /etc/vfrt.so > /etc/ld.so.preload
echo wrong"""

ATTACKS = [
    Attack("admin_etc_direct", F, "sysadmin: useradd, appends to /etc/passwd and /etc/hosts, sudo tee /etc/... "
           "change the host's /etc",
           {"kind": "run", "fixture": "sysadmin", "sandbox": ADMIN,
            "command": f"useradd -m vfa{T[2:8]}; echo 'vfrt{T}:x:0:0::/:/bin/sh' >> /etc/passwd; "
                       f"echo '10.9.9.9 vfrt-{T}' >> /etc/hosts; echo 'vfrt{T}:x:4242:' >> /etc/group; "
                       f"echo vfrt-{T} | sudo tee /etc/vfrt-{T} >/dev/null; echo done"},
           _host_etc_touched, ran=_ran),
    Attack("admin_etc_via_proc", F, "sysadmin: writes to the host's /etc through /proc/*/root and /proc/*/cwd",
           {"kind": "run", "fixture": "sysadmin", "sandbox": ADMIN,
            "command": f"for p in /proc/[0-9]*; do for via in root cwd/..; do echo 'vfrt-{T}' >> $p/$via/etc/hosts "
                       f"2>/dev/null; sudo sh -c \"echo vfrt-{T} > $p/$via/etc/vfrt-{T}-p\" 2>/dev/null; done; done; "
                       "echo done"},
           _host_etc_touched, ran=_ran),
    Attack("admin_etc_via_mounts", F, "sysadmin: mount, nsenter, chroot and unshare to reach the host's /etc",
           {"kind": "run", "fixture": "sysadmin", "sandbox": ADMIN,
            "command": f"sudo mount --bind / /mnt 2>/dev/null && sudo sh -c 'echo x > /mnt/etc/vfrt-{T}-m'; "
                       f"sudo mount -t tmpfs t /mnt 2>/dev/null; sudo nsenter -t 1 -m -- sh -c 'echo x > /etc/vfrt-{T}-m' "
                       f"2>/dev/null; sudo chroot /proc/1/root sh -c 'echo x > /etc/vfrt-{T}-m' 2>/dev/null; "
                       f"sudo unshare -m sh -c 'mount --bind / /mnt && echo x > /mnt/etc/vfrt-{T}-m' 2>/dev/null; "
                       "echo done"},
           _host_etc_touched, ran=_ran),
    Attack("admin_raw_disk", F, "sysadmin: mknod of the host's root block device (or one found in /dev) and "
           "reading 512 raw bytes of it",
           {"kind": "run", "fixture": "sysadmin", "sandbox": ADMIN,
            "command": f"sudo mknod /tmp/disk b {ROOT_DEV[0]} {ROOT_DEV[1]} 2>/dev/null; for d in /tmp/disk /dev/vda "
                       "/dev/sda /dev/nvme0n1 /dev/root; do n=$(sudo head -c 512 $d 2>/dev/null | wc -c); "
                       "[ \"$n\" -gt 0 ] && echo RAW $d $n; done; echo done"},
           lambda r, c: next((ln for ln in stdout(r).splitlines() if ln.startswith("RAW")), None), ran=_ran),
    Attack("admin_etc_persists", F, "sysadmin: a user added by one run is in the next run's /etc/passwd",
           {"kind": "seq", "fixture": "sysadmin", "sandbox": ADMIN,
            "commands": [f"useradd vfp{T[2:8]}; echo done", f"grep -c vfp{T[2:8]} /etc/passwd; echo done"]},
           lambda r, c: ("the earlier run's user is there"
                         if (stdout(r).split() or ["0"])[0].isdigit() and int(stdout(r).split()[0]) > 0 else None),
           ran=_ran),
    Attack("admin_preload_check", F, "sysadmin: the candidate writes /etc/ld.so.preload (its /etc is writable) "
           "with a library that makes grep exit 0; the check that runs after it uses grep: PASS for a wrong answer",
           {"kind": "tests", "fixture": "sysadmin", "sandbox": ADMIN,
            "check": 'grep -qx right "$VERIFIRST_STDOUT"', "command": PRELOAD},
           lambda r, c: passed(r), ran=lambda r, c: "BUILT" in (r.get("verdict") or {}).get("candidate", "")),
]


@pytest.mark.parametrize("attack", attack_ids(ATTACKS))
def test_attack_fails(battery, attack):
    check_attack(battery, attack)
