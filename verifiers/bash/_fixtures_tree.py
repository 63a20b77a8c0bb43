"""What a fixture is made of: entries (dirs, files, symlinks with modes, owners and mtimes), the
Fixture that holds them, the build time relative mtimes count from, bash's `echo` bytes and the
tree that collects entries like `mkdir -p` (with `tar -czf` for archives inside a fixture)."""
from __future__ import annotations

import calendar
import gzip
import hashlib
import io
import json
import tarfile
import time
from dataclasses import dataclass, field

# Mount points and usr-merge links every fixture root carries; the sandbox binds over them
# and the file-system diff never looks inside them.
MOUNT_POINTS = ("usr", "etc", "proc", "dev", "sys")
# Tarball member times: the peers built their images around this date.
ARCHIVE_EPOCH = calendar.timegm((2024, 5, 1, 0, 0, 0))
DAY = 86400


@dataclass(frozen=True)
class Ago:
    """An mtime relative to the fixture build time of this process (see `build_time`)."""

    seconds: int


@dataclass(frozen=True)
class Entry:
    path: str                    # relative to the fixture root, no leading slash
    kind: str                    # "dir" | "file" | "symlink"
    mode: int = 0o644
    data: bytes = b""            # file content, or symlink target
    mtime: int | Ago = Ago(0)    # absolute epoch seconds (UTC) or relative to build time
    uid: int = 0                 # owner inside a sysadmin run (0: root; a declared user's uid)

    @property
    def sha256(self) -> str | None:
        if self.kind == "dir":
            return None
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class Fixture:
    name: str
    entries: list[Entry]
    env: dict[str, str] = field(default_factory=dict)
    description: str = ""
    sysadmin: bool = False  # the sandbox's sysadmin mode: writable /etc, shadow, sudo/su (sandbox.py)
    users: tuple = ()  # declared accounts (_accounts.User); any implies sysadmin mode
    image: dict | None = None  # the task image under /usr and /etc (images.check_image); None: the host's

    @property
    def content_hash(self) -> str:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = self.__dict__["_hash"] = self._compute_hash()
        return cached

    def _compute_hash(self) -> str:
        h = hashlib.sha256()
        for e in self.entries:
            mt = f"ago{e.mtime.seconds}" if isinstance(e.mtime, Ago) else str(e.mtime)
            h.update(f"{e.path}\0{e.kind}\0{e.mode:o}\0{mt}\0".encode() + (f"uid{e.uid}\0".encode() if e.uid else b""))
            h.update(hashlib.sha256(e.data).digest())
        h.update(json.dumps(self.env, sort_keys=True).encode())
        if self.sysadmin:
            h.update(b"\0sysadmin")
        if self.users:
            h.update(repr(self.users).encode())
        if self.image:
            h.update(json.dumps(self.image, sort_keys=True).encode())
        return h.hexdigest()


_BUILD_TIME: int | None = None


def build_time() -> int:
    """The 'image build' time of this process: two whole hours ago, fixed for its lifetime.

    Fresh files get this mtime, so `find -mmin +5` matches them as it does in a prebuilt image,
    and two runs in one process (gold, candidate) see byte-identical `ls -l` output.
    """
    global _BUILD_TIME
    if _BUILD_TIME is None:
        _BUILD_TIME = int(time.time()) // 3600 * 3600 - 2 * 3600
    return _BUILD_TIME


def resolve_mtime(mtime: int | Ago) -> int:
    return build_time() - mtime.seconds if isinstance(mtime, Ago) else mtime


def echo_e(text: str) -> bytes:
    """What bash's `echo -e TEXT` writes (escapes \\n \\t \\\\ \\xHH \\0NNN; others kept)."""
    out, i = bytearray(), 0
    simple = {"n": 10, "t": 9, "r": 13, "a": 7, "b": 8, "f": 12, "v": 11, "e": 27, "\\": 92}
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out += ch.encode()
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "x" and i + 2 < len(text) and text[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < len(text) and j < i + 4 and text[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(text[i + 2:j], 16))
            i = j
        elif nxt == "0":
            j = i + 2
            while j < len(text) and j < i + 5 and text[j] in "01234567":
                j += 1
            out.append(int(text[i + 2:j] or "0", 8) & 0xFF)
            i = j
        else:
            out += ch.encode()
            i += 1
    return bytes(out) + b"\n"


def echo(text: str) -> bytes:
    """What bash's plain `echo TEXT` writes (no escape processing)."""
    return text.encode() + b"\n"


def utc(stamp: str) -> int:
    """`touch -t CCYYMMDDhhmm.ss` in the UTC of a container."""
    return calendar.timegm(time.strptime(stamp, "%Y%m%d%H%M.%S"))


class _Tree:
    """Collects entries; parent directories are created implicitly, like `mkdir -p`."""

    def __init__(self) -> None:
        self.items: dict[str, Entry] = {}

    def dir(self, path: str, mode: int = 0o755, mtime: int | Ago = Ago(0)) -> None:
        path = path.strip("/")
        parts = path.split("/")
        for k in range(1, len(parts)):
            parent = "/".join(parts[:k])
            self.items.setdefault(parent, Entry(parent, "dir", 0o755))
        if path not in self.items or self.items[path].kind != "dir" or mode != 0o755 or mtime != Ago(0):
            self.items[path] = Entry(path, "dir", mode, b"", mtime)

    def file(self, path: str, data: bytes | str, mode: int = 0o644, mtime: int | Ago = Ago(0)) -> None:
        path = path.strip("/")
        if "/" in path:
            parent = path.rsplit("/", 1)[0]
            if parent not in self.items:
                self.dir(parent)
        self.items[path] = Entry(path, "file", mode, data.encode() if isinstance(data, str) else data, mtime)

    def symlink(self, path: str, target: str) -> None:
        path = path.strip("/")
        self.items[path] = Entry(path, "symlink", 0o777, target.encode(), Ago(0))

    def chmod(self, path: str, mode: int) -> None:
        e = self.items[path.strip("/")]
        self.items[e.path] = Entry(e.path, e.kind, mode, e.data, e.mtime)

    def entries(self) -> list[Entry]:
        return [self.items[k] for k in sorted(self.items)]

    def tar_gz(self, prefix: str, only: list[str] | None = None) -> bytes:
        """`tar -czf X /prefix` (or the listed paths): members without the leading slash."""
        names = only or sorted(k for k in self.items if k == prefix or k.startswith(prefix + "/"))
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for name in names:
                e = self.items[name]
                info = tarfile.TarInfo(e.path + ("/" if e.kind == "dir" else ""))
                info.mode, info.mtime, info.uname, info.gname = e.mode, ARCHIVE_EPOCH, "root", "root"
                if e.kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                else:
                    info.size = len(e.data)
                    tar.addfile(info, io.BytesIO(e.data))
        return _gzip(raw.getvalue(), name="")

    def gitkeep(self, dirs: list[str]) -> None:
        for d in dirs:
            self.file(f"{d}/.gitkeep", b"")


def _gzip(data: bytes, name: str) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=out, mtime=ARCHIVE_EPOCH) as gz:
        gz.write(data)
    return out.getvalue()
