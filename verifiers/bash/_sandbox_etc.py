"""The curated, read-only /etc the sandbox binds: what programs need, no host secrets (never
shadow, gshadow, ssh keys, sudoers); and sysadmin mode's writable /etc and package database.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

from verifirst.core.atomic import publish_dir
from verifirst.verifiers.bash.fixtures import Entry, Fixture, write_tree

HOSTNAME = "verifirst"

# Plain files and directories taken from the host when present.
_COPY = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf", "host.conf",
    "gai.conf", "networks", "protocols", "services", "ethertypes", "rpc", "mime.types", "magic",
    "magic.mime", "inputrc", "bash.bashrc", "profile", "profile.d", "environment", "login.defs",
    "debian_version", "os-release", "issue", "issue.net", "lsb-release", "crontab", "cron.d",
    "ImageMagick-6", "ImageMagick-7", "fonts", "python3", "python3.11", "python3.12", "localtime",
    "timezone", "mtab", "locale.alias", "manpath.config", "bindresvport.blacklist", "mke2fs.conf",
    "wgetrc", "skel", "iproute2", "netconfig", "terminfo", "libaudit.conf", "gitconfig",
)

_PASSWD = """root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
sync:x:4:65534:sync:/bin:/bin/sync
games:x:5:60:games:/usr/games:/usr/sbin/nologin
man:x:6:12:man:/var/cache/man:/usr/sbin/nologin
lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin
mail:x:8:8:mail:/var/mail:/usr/sbin/nologin
news:x:9:9:news:/var/spool/news:/usr/sbin/nologin
uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin
proxy:x:13:13:proxy:/bin:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
backup:x:34:34:backup:/var/backups:/usr/sbin/nologin
list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin
irc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin
_apt:x:42:65534::/nonexistent:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
ubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash
"""

_GROUP = """root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:ubuntu
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
news:x:9:
uucp:x:10:
man:x:12:
proxy:x:13:
kmem:x:15:
dialout:x:20:ubuntu
cdrom:x:24:ubuntu
sudo:x:27:ubuntu
audio:x:29:ubuntu
www-data:x:33:
backup:x:34:
operator:x:37:
list:x:38:
irc:x:39:
src:x:40:
shadow:x:42:
utmp:x:43:
video:x:44:ubuntu
plugdev:x:46:ubuntu
staff:x:50:
games:x:60:
users:x:100:ubuntu
crontab:x:101:
nogroup:x:65534:
ubuntu:x:1000:
"""

_WRITTEN = {
    "passwd": _PASSWD,
    "group": _GROUP,
    "hostname": HOSTNAME + "\n",
    "hosts": f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{HOSTNAME}\n",
    "resolv.conf": "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
    "shells": "# /etc/shells: valid login shells\n/bin/sh\n/usr/bin/sh\n/bin/bash\n/usr/bin/bash\n"
              "/bin/rbash\n/usr/bin/rbash\n/bin/dash\n/usr/bin/dash\n",
    "fstab": "# UNCONFIGURED FSTAB FOR BASE SYSTEM\n",
    "machine-id": "0123456789abcdef0123456789abcdef\n",
    "timezone": "Etc/UTC\n",
    "environment": "PATH=\"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\n",
}
_LINKS = {"mtab": "../proc/self/mounts", "localtime": "/usr/share/zoneinfo/Etc/UTC"}
_NEVER = ("shadow", "gshadow", "sudoers", "ssh", "ssl/private", "security/opasswd")


def _fingerprint(host_etc: Path) -> str:
    """Hash of the host inputs, so an apt install (new alternatives) gives a new /etc."""
    h = hashlib.sha256(repr(sorted(_WRITTEN.items())).encode())
    for name in _COPY:
        p = host_etc / name
        if p.is_symlink():
            h.update(f"{name}>{os.readlink(p)}".encode())
        elif p.is_dir():
            for sub in sorted(os.listdir(p)):
                q = p / sub
                h.update(f"{name}/{sub}:{os.readlink(q) if q.is_symlink() else q.stat().st_size}".encode())
        elif p.is_file():
            h.update(f"{name}:{p.stat().st_size}:{p.stat().st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _curated(host_etc: Path, copy: tuple[str, ...], never: tuple[str, ...]) -> list[Entry]:
    """Fixture entries under `etc/`: the host's files named in `copy`, _WRITTEN and _LINKS, less `never`."""
    out: list[Entry] = []
    for name in copy:
        if name not in _WRITTEN and name not in _LINKS:
            _entries_from(host_etc / name, f"etc/{name}", out)
    out += [Entry(f"etc/{name}", "file", 0o644, text.encode()) for name, text in _WRITTEN.items()]
    out += [Entry(f"etc/{name}", "symlink", 0o777, target.encode()) for name, target in _LINKS.items()]
    return [e for e in out if not any(e.path == f"etc/{n}" or e.path.startswith(f"etc/{n}/") for n in never)]


def build_etc(parent: Path, host_etc: Path = Path("/etc")) -> Path:
    """Create (once, atomically) <parent>/etc-<fingerprint> readable by everyone; return it."""
    def fill(tmp: Path) -> None:
        entries = [dataclasses.replace(e, path=e.path[4:]) for e in _curated(host_etc, _COPY, _NEVER)]
        write_tree(Fixture("etc", entries), tmp)

    return publish_dir(parent / f"etc-{_fingerprint(host_etc)}", fill, prefix=".etc.")


# ---- sysadmin mode: a writable /etc that is part of the run's root (see sandbox.py) -------------

# What user and package administration reads besides the curated files (no secrets in any).
_ADMIN_COPY = ("pam.d", "security", "default", "sudo.conf", "sudo_logsrvd.conf", "adduser.conf",
               "deluser.conf", "subuid", "subgid", "pam.conf", "sudoers.d")
_ADMIN_NEVER = ("security/opasswd",)
SHADOW_DAY = 19844  # 2024-05-01, the fixtures' image date, as days since the epoch
SUDOERS = ("Defaults\tenv_reset\nDefaults\tmail_badpass\n"
           'Defaults\tsecure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n'
           "root\tALL=(ALL:ALL) ALL\n%sudo\tALL=(ALL:ALL) NOPASSWD: ALL\n@includedir /etc/sudoers.d\n")


def _table(text: str, width: int) -> dict[str, list[str]]:
    """name -> fields of a passwd/group file; malformed and NIS (+/-) lines dropped."""
    rows = {}
    for line in text.splitlines():
        f = line.split(":")
        if len(f) == width and f[0] and not f[0].startswith(("+", "-", "#")) and f[2].isdigit():
            rows.setdefault(f[0], f)
    return rows


def _merged(host_etc: Path, name: str, curated: str, width: int) -> dict[str, list[str]]:
    """The host's entries (password field forced to `x`), then the container's it lacks."""
    try:
        host = _table((host_etc / name).read_text(errors="replace"), width)
    except OSError:
        host = {}
    for f in host.values():
        f[1] = "x"
    return {**host, **{k: f for k, f in _table(curated, width).items() if k not in host}}


def account_files(host_etc: Path = Path("/etc")) -> dict[str, tuple[str, int]]:
    """passwd, group, shadow, gshadow for sysadmin mode: {name: (text, mode)}: the host's
    passwd/group entries (no secrets there) plus the container's standard ones; shadow and gshadow
    with locked placeholders (`*` for system ids, `!` for users), never read from the host.

    Args:
        host_etc: the host's /etc.
    """
    users = _merged(host_etc, "passwd", _PASSWD, 7)
    groups = _merged(host_etc, "group", _GROUP, 4)

    def lock(n: str) -> str:
        return "!" if 1000 <= int(n) < 65534 else "*"

    return {
        "passwd": ("".join(":".join(f) + "\n" for f in users.values()), 0o644),
        "group": ("".join(":".join(f) + "\n" for f in groups.values()), 0o644),
        "shadow": ("".join(f"{u}:{lock(f[2])}:{SHADOW_DAY}:0:99999:7:::\n" for u, f in users.items()), 0o640),
        "gshadow": ("".join(f"{g}:{lock(f[2])}::{f[3]}\n" for g, f in groups.items()), 0o640),
    }


def _entries_from(src: Path, rel: str, out: list[Entry]) -> None:
    """Host file or tree `src` as fixture entries under `rel` (symlinks kept, unreadable skipped)."""
    try:
        st = os.lstat(src)
    except OSError:
        return
    mtime = int(st.st_mtime)
    if os.path.islink(src):
        out.append(Entry(rel, "symlink", 0o777, os.fsencode(os.readlink(src)), mtime))
    elif src.is_dir():
        out.append(Entry(rel, "dir", 0o755, b"", mtime))
        for name in sorted(os.listdir(src)):
            _entries_from(src / name, f"{rel}/{name}", out)
    elif src.is_file():
        try:
            data = src.read_bytes()
        except OSError:
            return
        out.append(Entry(rel, "file", 0o644 | (st.st_mode & 0o111), data, mtime))


def sysadmin_entries(host_etc: Path = Path("/etc")) -> list:
    """The sysadmin /etc as fixture entries under `etc/` (written into each run's root: per run,
    writable, in the diff): the curated files, the accounts, sudoers, PAM, the tools' defaults.

    Args:
        host_etc: the host's /etc.
    """
    texts = {**account_files(host_etc), "sudoers": (SUDOERS, 0o440)}
    never = tuple(n for n in _NEVER if n not in texts) + _ADMIN_NEVER
    return [e for e in _curated(host_etc, _COPY + _ADMIN_COPY, never) if e.path[4:] not in texts] + [
        Entry(f"etc/{name}", "file", mode, text.encode()) for name, (text, mode) in texts.items()]


_DPKG = ("status", "available", "diversions", "alternatives")


def dpkg_entries(host_dpkg: Path = Path("/var/lib/dpkg")) -> list:
    """The package database (`dpkg -l`, `dpkg -s`) as fixture entries under `var/lib/dpkg/`, with the
    empty directories dpkg expects (per-package file lists left out).

    Args:
        host_dpkg: the host's /var/lib/dpkg.
    """
    if not host_dpkg.is_dir():
        return []
    out: list = [Entry("var/lib/dpkg", "dir", 0o755)]
    for name in _DPKG:
        _entries_from(host_dpkg / name, f"var/lib/dpkg/{name}", out)
    return out + [Entry(f"var/lib/dpkg/{d}", "dir", 0o755) for d in ("info", "updates", "triggers")]
