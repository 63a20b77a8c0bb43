"""Users and groups a fixture declares, as the benchmark images carry them (a user `test` with
passwordless sudo, `snoopy` at uid 2001): their passwd, group, shadow and gshadow lines, a sudoers
drop-in, and home directories owned by them. A fixture that declares users runs in sysadmin mode
(its own writable /etc and, as root, a namespace of 65536 ids in which each user's uid is its own).

    fixtures.custom("t", {...}, users=[{"name": "test", "uid": 1000, "sudo": True}])
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from verifirst.core.errors import InputError

__all__ = ["User", "parse_users", "with_users"]

_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
MAX_ID = 65533  # the sysadmin namespace holds 0..65535; 65534 is nobody


@dataclass(frozen=True)
class User:
    """One declared account: a user with its own group of the same name and id."""

    name: str
    uid: int
    home: str
    shell: str = "/bin/bash"
    sudo: bool = False
    groups: tuple[str, ...] = ()


def _field(where: str, key: str, why: str, expected: str) -> InputError:
    return InputError(f"{where}.{key}: {why}", field=f"{where}.{key}", expected=expected)


def parse_users(spec: object, where: str = "users") -> tuple[User, ...]:
    """Declared users from a JSON-able list of {"name", "uid", "home"?, "shell"?, "sudo"?, "groups"?}.

    Args:
        spec: the list (None or empty: no users).
        where: the field name errors carry.

    Raises InputError naming the entry and key for a bad name, id, path or a duplicate.
    """
    if not spec:
        return ()
    if not isinstance(spec, list):
        raise InputError(f"{where} must be a list of users", field=where, expected='[{"name": "test", "uid": 1000}]')
    out, seen = [], set()
    for i, u in enumerate(spec):
        at = f"{where}[{i}]"
        if not isinstance(u, dict) or set(u) - {"name", "uid", "home", "shell", "sudo", "groups"}:
            raise InputError(f"{at} must be an object with name, uid and optionally home, shell, sudo, groups",
                             field=at, expected='{"name": "test", "uid": 1000, "sudo": true}')
        name, uid = u.get("name"), u.get("uid")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise _field(at, "name", f"{name!r} is not a user name", "lower-case letters, digits, _ and -")
        if name in seen:
            raise _field(at, "name", f"{name!r} is declared twice", "each user once")
        if not isinstance(uid, int) or isinstance(uid, bool) or not 1 <= uid <= MAX_ID:
            raise _field(at, "uid", f"{uid!r} is not a uid for a declared user", f"an integer in 1..{MAX_ID}")
        home = u.get("home", f"/home/{name}")
        if not isinstance(home, str) or not home.startswith("/") or ".." in home.split("/") or ":" in home:
            raise _field(at, "home", f"{home!r} is not an absolute path", "/home/NAME")
        shell = u.get("shell", "/bin/bash")
        if not isinstance(shell, str) or not shell.startswith("/") or ":" in shell:
            raise _field(at, "shell", f"{shell!r} is not an absolute path", "/bin/bash")
        groups = u.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) and _NAME.fullmatch(g) for g in groups):
            raise _field(at, "groups", f"{groups!r} is not a list of group names", '["sudo", "adm"]')
        seen.add(name)
        out.append(User(name, uid, home.rstrip("/") or "/", shell, bool(u.get("sudo", False)), tuple(groups)))
    return tuple(out)


def _rows(text: str) -> list[list[str]]:
    return [line.split(":") for line in text.splitlines() if line]


def _text(rows: list[list[str]]) -> bytes:
    return "".join(":".join(r) + "\n" for r in rows).encode()


def with_users(etc: dict[str, bytes], users: tuple[User, ...]) -> dict[str, bytes]:
    """The account files (passwd, group, shadow, gshadow) with `users` added, replacing an entry of
    the same name or id, plus `sudoers.d/verifirst-users` for those with sudo.

    Args:
        etc: {file name under /etc: content} for passwd, group, shadow, gshadow.
        users: the declared users.
    """
    names, uids = {u.name for u in users}, {str(u.uid) for u in users}
    keep = {k: [r for r in _rows(etc[k].decode()) if r[0] not in names and (k in ("shadow", "gshadow")
                                                                          or r[2] not in uids)]
            for k in ("passwd", "group", "shadow", "gshadow")}
    for u in users:
        keep["passwd"].append([u.name, "x", str(u.uid), str(u.uid), "", u.home, u.shell])
        keep["group"].append([u.name, "x", str(u.uid), ""])
        keep["shadow"].append([u.name, "!", "19844", "0", "99999", "7", "", "", ""])  # locked: no password
        keep["gshadow"].append([u.name, "!", "", ""])
    for u in users:  # supplementary groups that exist in the image
        for g in u.groups:
            for table in ("group", "gshadow"):
                for r in keep[table]:
                    if r[0] == g:
                        r[-1] = ",".join([m for m in r[-1].split(",") if m] + [u.name])
    out = {k: _text(v) for k, v in keep.items()}
    sudo = "".join(f"{u.name}\tALL=(ALL:ALL) NOPASSWD: ALL\n" for u in users if u.sudo)
    if sudo:
        out["sudoers.d/verifirst-users"] = sudo.encode()
    return out
