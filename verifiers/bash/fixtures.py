"""Fixture file systems the sandbox copies fresh for every command.

Written from the published descriptions of the NL2SH-ALFA (icalfa) and InterCode-Bash Docker
images: same paths, contents, modes and old timestamps, built deterministically in Python.
Where a peer setup script fails on GNU tools (BSD `date -v`, `mkdir -d`, 31 February) we build
what the script meant: the file exists with the intended age.

A fixture is a list of entries; `build(name)` returns it (cached per process) and
`materialize(name)` writes it once under ~/.cache/verifirst/fixtures/<name>-<hash>/.
"""
from __future__ import annotations

import calendar
import dataclasses
import gzip
import hashlib
import importlib.util
import io
import json
import os
import posixpath
import stat
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from verifirst.core.atomic import publish_dir
from verifirst.core.errors import InputError

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


def _skeleton(t: _Tree) -> None:
    """An Ubuntu container's root: usr-merge links, mount points, /root/.bashrc, /tmp, /var."""
    for link in ("bin", "sbin", "lib", "lib64"):
        host = Path("/") / link
        if host.is_symlink():
            t.symlink(link, os.readlink(host))
        else:
            t.dir(link)
    for d in MOUNT_POINTS:
        t.dir(d)
    for d in ("boot", "home/ubuntu", "media", "mnt", "opt", "run/lock", "srv", "var/backups",
              "var/cache", "var/lib", "var/local", "var/mail", "var/opt", "var/spool/cron/crontabs",
              "var/log/apt"):
        t.dir(d)
    t.dir("root", 0o700)
    t.dir("tmp", 0o1777)
    t.dir("var/tmp", 0o1777)
    t.symlink("var/run", "/run")
    t.symlink("var/lock", "/run/lock")
    bashrc = ("# ~/.bashrc: executed by bash(1) for non-login shells.\n"
              "[ -z \"$PS1\" ] && return\n"
              "HISTCONTROL=ignoredups:ignorespace\nshopt -s histappend checkwinsize\n"
              "PS1='${debian_chroot:+($debian_chroot)}\\u@\\h:\\w\\$ '\n"
              "alias ls='ls --color=auto'\n")
    profile = ("# ~/.profile: executed by Bourne-compatible login shells.\n"
               "if [ \"$BASH\" ]; then\n  if [ -f ~/.bashrc ]; then\n    . ~/.bashrc\n  fi\nfi\n"
               "mesg n 2> /dev/null || true\n")
    t.file("root/.bashrc", bashrc)
    t.file("root/.profile", profile)
    t.file("home/ubuntu/.bashrc", bashrc)
    t.file("home/ubuntu/.profile", profile)
    t.file("home/ubuntu/.bash_logout", "# ~/.bash_logout: executed by bash(1) when login shell exits.\n")
    t.file("var/log/dpkg.log", "2024-04-29 10:00:00 startup archives unpack\n", mtime=Ago(30 * DAY))
    t.file("var/log/alternatives.log", "update-alternatives 2024-04-29 10:00:01: run with --install\n",
           mtime=Ago(30 * DAY))
    t.file("var/log/apt/history.log", "Start-Date: 2024-04-29  10:00:02\nCommandline: apt-get install -y bash\n",
           mtime=Ago(30 * DAY))
    t.file("var/log/lastlog", b"", mtime=Ago(30 * DAY))
    t.file("var/log/wtmp", b"", 0o664, mtime=Ago(30 * DAY))
    t.file("var/log/btmp", b"", 0o660, mtime=Ago(30 * DAY))


def _icalfa_docker_dir() -> Path | None:
    """The installed icalfa package's docker assets (located, never imported)."""
    try:
        spec = importlib.util.find_spec("icalfa")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "assets" / "docker"
    return d if d.is_dir() else None


def _peer_image_files(t: _Tree, n: int) -> None:
    """What the NL2SH-ALFA Dockerfiles also leave in /: the setup script (0755) and .gitignore.

    Gold commands read /setup_nl2b_fs_N.sh (20 in fs_1), so it is taken from the installed
    icalfa package at build time; without the package the fixture simply lacks it.
    """
    d = _icalfa_docker_dir()
    if d is None:
        return
    for src, dest, mode in ((d / f"setup_nl2b_fs_{n}.sh", f"setup_nl2b_fs_{n}.sh", 0o755),
                            (d / "docker.gitignore", ".gitignore", 0o644)):
        if src.is_file():
            t.file(dest, src.read_bytes(), mode)


# ---- NL2SH-ALFA / InterCode file systems -------------------------------------------------

def _fs1(t: _Tree, alfa: bool) -> None:
    tb = "testbed"
    for d in ("dir1/subdir1/subsubdir1", "dir1/subdir2", "dir2/subdir1", "dir2/subdir2/subsubdir1",
              "dir3/subdir1/subsubdir1", "dir3/subdir2", "dir3/subdir1/subsubdir1/tmp",
              "dir3/subdir1/subsubdir1/FooBar"):
        t.dir(f"{tb}/{d}")
    if alfa:
        t.gitkeep([f"{tb}/{d}" for d in (
            "dir1/subdir1/subsubdir1", "dir1/subdir2", "dir2/subdir1", "dir2/subdir2/subsubdir1",
            "dir3/subdir1/subsubdir1", "dir3/subdir2", "dir3/subdir1/subsubdir1/tmp",
            "dir3/subdir1/subsubdir1/FooBar")])
    t.file(f"{tb}/dir1/textfile1.txt", echo("Hello, World!"))
    t.file(f"{tb}/dir2/subdir1/textfile2.txt", echo_e("text file\\nAnother text file"))
    t.file(f"{tb}/dir3/subdir1/subsubdir1/textfile3.txt", echo_e("text file\\nYet another text file"))
    t.file(f"{tb}/dir1/subdir1/textfile4.txt", echo("Text file 4\\nGene 1"))
    t.file(f"{tb}/dir2/subdir2/textfile5.txt", echo("Text file 5Gene 2"))
    t.file(f"{tb}/dir3/textfile6.txt", echo("Text file 6"))
    t.file(f"{tb}/textfile7.txt", echo("Text file 7 with some random contents in it"))
    t.file(f"{tb}/dir3/subdir1/subsubdir1/file.txt", echo("Text file in tmp"))
    t.file(f"{tb}/recent.txt", b"", mtime=utc("202305312359.59"))
    t.file(f"{tb}/dir3/subdir1/subsubdir1/tmp/tmp.txt", echo("Text file in tmp"), mtime=utc("202205312359.59"))
    for n, p in ((1, "dir1/subdir1"), (2, "dir2"), (3, "dir3/subdir1/subsubdir1"),
                 (4, "dir1/subdir1/subsubdir1"), (5, "dir2/subdir2")):
        t.file(f"{tb}/{p}/shellscript{n}.sh", echo_e(f'#!/bin/sh\\necho "Shell script {n}"'), 0o755)
    for n, p in ((1, "dir1/subdir1/subsubdir1"), (2, "dir2/subdir2"), (3, "dir3/subdir1"), (4, "dir1/subdir1")):
        t.file(f"{tb}/{p}/pythonscript{n}.py", echo_e(f'#!/usr/bin/env python3\\nprint("Python script {n}")'), 0o755)
    hello = 'public class Hello { public static void main(String[] args) { System.out.println(\\"Hello world!\\"); }}'
    t.file(f"{tb}/Hello.java", echo(hello))
    t.file(f"{tb}/Hello1.java", echo(hello))
    t.file(f"{tb}/NewClass.java", echo('public class NewClass { public static void main(String[] args) '
                                       '{ System.out.println(\\"This is a new Java file!\\"); }}'))
    t.file(f"{tb}/dir2/subdir1/javafile1.java", echo('public class FirstClass { public static void main('
                                                     'String[] args) { System.out.println(\\"This is Java file 1!\\"); }}'))
    t.file(f"{tb}/dir1/AnotherHello.java", echo(hello))
    t.file(f"{tb}/dir1/subdir1/jsonfile1.json",
           echo_e('{\\n  "key1": "value1",\\n  "key2": "value2",\\n  "key3": "value3"\\n}'))
    t.file(f"{tb}/dir3/subdir2/csvfile1.csv", echo_e("column1,column2,column3\\nvalue1,value2,value3\\nvalue4,value5,value6"))
    t.file(f"{tb}/hello.php", echo('<?php echo "Hello, world!"; ?>'))
    t.file(f"{tb}/dir1/info.php", echo("<?php phpinfo(); ?>"))
    t.file(f"{tb}/hello.c", echo_e('#include <stdio.h>\\nint main() {\\n  printf(\\"Hello, world!\\");\\n  return 0;\\n}'))
    t.file(f"{tb}/dir3/subdir1/subsubdir1/FooBar/file.txt", echo("A sample file with FooBar"))
    t.file(f"{tb}/FooBar.html", echo("<html><head><title>Test</title></head><body><h1>Hello, FooBar!</h1></body></html>"))
    t.file("index.html", echo("<html><head><title>Test</title></head><body><h1>Hello, world!</h1></body></html>"))
    if alfa:
        index = echo("<html><head><title>Test</title></head><body><h1>Hello, foo!</h1></body></html>")
        t.file(f"{tb}/index.html", index)
        t.file(f"{tb}/index.html.gz", _gzip(index, name="index.html"))
        t.file(f"{tb}/hello1.php", echo_e('<?php echo "Hello, world!"; ?>\\n<>'))
        t.file(f"{tb}/hello1.js", echo_e('console.log("Hello, world!");\\n<>'))
        t.file(f"{tb}/dir1/perms.txt", echo("File with perms"), 0o1553)


def _fs2(t: _Tree, alfa: bool) -> None:
    s = "system"
    for d in ("folder1", "folder2", "folder3/temp/temp1/temp", "folder3/temp/temp1/temp_1",
              "folder3/backup_dbg/backup", "temp"):
        t.dir(f"{s}/{d}")
    if alfa:
        t.gitkeep([f"{s}/{d}" for d in ("folder1", "folder2", "folder3", "folder3/temp/temp1",
                                        "folder3/temp/temp1/temp", "folder3/temp/temp1/temp_1",
                                        "folder3/backup_dbg", "folder3/backup_dbg/backup", "temp")])
    t.file(f"{s}/text1.txt", echo("Hello world!"))
    t.file(f"{s}/folder1/text2.txt", echo_e("Another hello world file"))
    t.file(f"{s}/folder1/text3.txt", echo("- e Hello!\\nAnother hello world file"))
    t.file(f"{s}/folder1/text4.txt", echo_e("Hello!\\nAnother hello world file"))
    t.file(f"{s}/folder1/keep.txt", echo_e("Keep this file"))
    t.file(f"{s}/text3.txt", echo_e("Foo!\\n The first line in this file is foo"))
    t.file(f"{s}/folder2/text1.txt", echo_e("The first foo file in this directory!"))
    t.file(f"{s}/folder2/special_text1.txt", echo_e("The file with special name"))
    t.file(f"{s}/folder2/special_text2.txt", echo_e("The second file with special name"))
    t.file(f"{s}/folder2/special text3.txt", echo_e("The third file with special name"))
    t.file(f"{s}/folder3/special text4.txt", echo_e("The fourth file with special name"))
    t.file(f"{s}/folder3/temp/temp1/text1.txt",
           echo_e("The first line\\nThe second line\\nThe third line\\nThe fourth line;\\nThe fifth line"))
    t.file(f"{s}/folder3/backup_dbg/text1_dbg.txt", echo_e("The first line\\n\\n"))
    t.file(f"{s}/folder3/temp/empty.txt", b"")
    t.file(".placeholder", b"")
    t.file(f"{s}/html1.html", echo_e("<html>\\n<head>\\n<title>HTML File 1</title>\\n</head>\\n<body>\\n"
                                     "<h1>HTML File 1</h1>\\n<p>This is the first HTML file</p>\\n</body>\\n</html>"))
    elf = echo_e("\\x7f\\x45\\x4c\\x46\\x01\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\x03"
                 "\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x80\\x04\\x08\\x00\\x80\\x04\\x08")
    t.file(f"{s}/folder1/a.out", elf)
    t.file(f"{s}/a.out", elf, mtime=utc("202304012359.00"))
    t.file(f"{s}/folder1/doc1.doc", echo_e("This is a doc file"))
    t.file(f"{s}/folder1/doc2.doc", echo_e("This is another doc file"))
    t.file(f"{s}/folder1/log1.log", echo_e("This is a log file"))
    t.file(f"{s}/folder3/backup_dbg/sql1.sql", _SQL, mtime=utc("202303012359.00"))
    t.file(f"{s}/folder1/script1.sh", echo_e("#!/bin/bash\\n\\n# This is a script file"))
    t.file(f"{s}/folder1/new.sh", echo_e("#!/bin/bash\\n\\n# New script file"))
    t.file(f"{s}/folder1/data.csv", echo_e("1,2,3,4,5,6,7,8,9,10"))
    t.file(f"{s}/.DS_Store", b"")
    if alfa:
        t.file(f"{s}/folder3/temp/.DS_Store", b"")
    t.file(f"{s}/MANIFEST", "text1.txt\ntext3.txt\n")
    t.file(f"{s}/folder2.tar.gz", t.tar_gz(f"{s}/folder2"))
    t.file(f"{s}/folder1/recent.txt", b"", mtime=utc("202305312359.59"))
    t.file(f"{s}/old.txt", b"", mtime=utc("202305222359.59"))
    t.file(f"{s}/folder1/old2.txt", b"", mtime=utc("202303012359.59"))
    t.file(f"{s}/temp/keep.txt", b"", mtime=utc("202303012159.59"))


_SQL = echo_e("CREATE TABLE Persons (\\nPersonID int,\\nLastName varchar(255),\\nFirstName varchar(255),"
              "\\nAddress varchar(255),\\nCity varchar(255)\\n);")


def _fs3(t: _Tree, alfa: bool) -> None:
    w = "workspace"
    t.dir("backup")
    for d in ("dir1", "dir2/mysql", "test/dir1", "test/2dir", "test/3dir"):
        t.dir(f"{w}/{d}")
    t.dir(f"{w}/test/1dir", mtime=Ago(365 * DAY))
    if alfa:
        t.gitkeep(["backup"] + [f"{w}/{d}" for d in ("dir1", "dir2", "dir2/mysql", "test", "test/dir1",
                                                     "test/2dir", "test/3dir", "test/1dir")])
    t.file(f"{w}/dir1/hello.c", echo_e('#include <stdio.h>\\n\\nint main() {\\n\\tprintf("Hello, World!");\\n\\treturn 0;\\n}'))
    t.file(f"{w}/dir1/sum.c", echo_e('#include <stdio.h>\\n\\nint main() {\\n\\tint a, b, sum;\\n\\tprintf("Enter two '
                                     'numbers to add\\\\n");\\n\\tscanf("%d%d", &a, &b);\\n\\tsum = a + b;\\n\\tprintf('
                                     '"Sum of entered numbers = %d\\\\n",sum);\\n\\treturn 0;\\n}'))
    t.file(f"{w}/dir1/script1.sh", echo_e("#!/bin/bash\\n\\n# This is a script file"), 0o755)
    t.file(f"{w}/dir1/new1.sh", echo_e("#!/bin/bash\\n\\n# New script file"), 0o755)
    t.file(f"{w}/new.sh", echo_e("#!/bin/bash\\n\\n# New script file"), 0o755)
    t.file(f"{w}/dir1/hello.txt", echo_e("hello!"))
    t.file(f"{w}/dir2/foo.txt", echo_e("Another hello world file"))
    t.file(f"{w}/dir2/hello.txt", echo_e("hello!"))
    five = "The first line\\nThe second line\\nThe third line\\nThe fourth line;\\nThe fifth line"
    t.file(f"{w}/dir1/long.txt", echo_e(five))
    t.file(f"{w}/dir1/terminate.txt", echo_e(five + "\\nTERMINATEThe sixth line--"))
    t.file(f"{w}/results.txt", echo("/workspace/dir1"))
    files = "/workspace/dir2/foo.txt\\n/workspace/dir9/foo.txt" if alfa else "/workspace/dir2/foo.txt"
    t.file(f"{w}/files.txt", echo_e(files))
    t.file(f"{w}/dir1/a.txt", echo("The first line") + b"\n" * 10)
    t.file("backup/file.txt", echo_e("new file\\n"))
    t.file(f"{w}/dir1/readonly.txt", b"", 0o400)
    t.file(f"{w}/dir1/all.txt", b"", 0o777)
    t.file(f"{w}/dir1/file.txt", b"\0" * 4096)
    t.file(f"{w}/dir1/file.c", b"\0" * 2048)
    t.file(f"{w}/recent.txt", b"", mtime=Ago(DAY))
    t.file(f"{w}/recent1.txt", b"", mtime=utc("202305312359.59"))
    t.file(f"{w}/old.txt", b"", mtime=utc("202302282359.59"))
    t.file(f"{w}/old1.txt", b"", mtime=utc("202304302359.59"))
    t.file(f"{w}/old2.txt", b"", mtime=utc("202301312359.59"))
    t.file(f"{w}/dir1/.hidden1.txt", echo_e("This is a hidden file"))
    t.file(f"{w}/.hidden.txt", echo_e("This is another hidden file"))
    t.file(f"{w}/dir2/mysql/sql1.sql", _SQL)
    t.file(f"{w}/archive.tar.gz", t.tar_gz(w, only=[f"{w}/dir2/foo.txt", f"{w}/recent.txt"]))
    t.file(f"{w}/dir2/csvfile1.csv", echo_e("column1,column2,column3\\nvalue1,value2,value3\\nvalue4,value5,value6"
                                            "\\nvalue7,values8,values9"))


def _fs5(t: _Tree) -> None:
    tb = "testbed"
    dirs = ("dir1/subdir1/subsubdir1", "dir1/subdir2", "dir2/subdir1", "dir2/subdir2/subsubdir1",
            "dir3/subdir1/subsubdir1", "dir3/subdir2")
    for d in dirs:
        t.dir(f"{tb}/{d}")
    t.gitkeep([f"{tb}/{d}" for d in dirs])
    for path, text in (("dir1/textfile1.txt", "Hello, World!"), ("dir2/subdir1/textfile2.txt", "Another text file"),
                       ("dir3/subdir1/subsubdir1/textfile3.txt", "Yet another text file"),
                       ("dir1/subdir1/textfile4.txt", "Text file 4"), ("dir2/subdir2/textfile5.txt", "Text file 5"),
                       ("dir3/textfile6.txt", "Text file 6")):
        t.file(f"{tb}/{path}", echo(text))
    for n, p in ((1, "dir1/subdir1"), (2, "dir2"), (3, "dir3/subdir1/subsubdir1"),
                 (4, "dir1/subdir1/subsubdir1"), (5, "dir2/subdir2")):
        t.file(f"{tb}/{p}/shellscript{n}.sh", echo_e(f"#!/bin/sh\\necho 'Shell script {n}'"), 0o755)
    for n, p in ((1, "dir1/subdir1/subsubdir1"), (2, "dir2/subdir2"), (3, "dir3/subdir1"), (4, "dir1/subdir1")):
        t.file(f"{tb}/{p}/pythonscript{n}.py", echo_e(f"#!/usr/bin/env python3\\nprint('Python script {n}')"), 0o755)
    t.file(f"{tb}/dir1/subdir1/jsonfile1.json",
           echo_e('{\\n  "key1": "value1",\\n  "key2": "value2",\\n  "key3": "value3"\\n}'))
    t.file(f"{tb}/dir3/subdir2/csvfile1.csv", echo_e("column1,column2,column3\\nvalue1,value2,value3\\nvalue4,value5,value6"))


def _make(body: Callable[[_Tree], None] | None) -> list[Entry]:
    t = _Tree()
    _skeleton(t)
    if body:
        body(t)
    return t.entries()


_BUILDERS: dict[str, tuple[Callable[[], list[Entry]], dict[str, str], str]] = {
    "empty": (lambda: _make(None), {}, "container skeleton only"),
    "nl2sh-fs1": (lambda: _make(lambda t: (_fs1(t, True), _peer_image_files(t, 1))),
                  {"FILES": "/testbed/hello.c /testbed/FooBar.html"},
                  "NL2SH-ALFA fs_1: /testbed tree, dir1-3, many file types, a gzip, mode 1553"),
    "nl2sh-fs2": (lambda: _make(lambda t: (_fs2(t, True), _peer_image_files(t, 2))), {},
                  "NL2SH-ALFA fs_2: /system, spaces, .DS_Store, a.out, tar.gz"),
    "nl2sh-fs3": (lambda: _make(lambda t: (_fs3(t, True), _peer_image_files(t, 3))), {},
                  "NL2SH-ALFA fs_3: /workspace and /backup"),
    "nl2sh-fs4": (lambda: _make(lambda t: _peer_image_files(t, 4)), {}, "NL2SH-ALFA fs_4: empty"),
    "nl2sh-fs5": (lambda: _make(lambda t: (_fs5(t), _peer_image_files(t, 5))), {},
                  "NL2SH-ALFA fs_5: a small /testbed"),
    "intercode-fs1": (lambda: _make(lambda t: _fs1(t, False)), {}, "InterCode-Bash fs_1: /testbed"),
    "intercode-fs2": (lambda: _make(lambda t: _fs2(t, False)), {}, "InterCode-Bash fs_2: /system"),
    "intercode-fs3": (lambda: _make(lambda t: _fs3(t, False)), {}, "InterCode-Bash fs_3: /workspace, /backup"),
    "intercode-fs4": (lambda: _make(None), {}, "InterCode-Bash fs_4: empty"),
    "sysadmin": (lambda: _make(None), {}, "container skeleton, sysadmin mode: writable /etc with "
                 "passwd/group/shadow/gshadow, sudo and su (useradd, gpasswd, passwd -l)"),
}
SYSADMIN = ("sysadmin",)  # built-in fixtures that run in the sandbox's sysadmin mode
NAMES = tuple(_BUILDERS)
_CACHE: dict[str, Fixture] = {}


def names() -> list[str]:
    return list(NAMES) + sorted(k for k in _CACHE if k not in _BUILDERS)


def build(name: str) -> Fixture:
    """The fixture called `name` (built once per process)."""
    if name in _CACHE:
        return _CACHE[name]
    if name not in _BUILDERS:
        raise InputError(f"unknown fixture {name!r}", field="fixture", expected=", ".join(names()))
    body, env, desc = _BUILDERS[name]
    fx = Fixture(name, body(), dict(env), desc, sysadmin=name in SYSADMIN)
    _CACHE[name] = fx
    return fx


def custom(name: str, files: dict[str, str | bytes | dict], env: dict[str, str] | None = None,
           base: str = "empty", users: list[dict] | None = None, image: dict | None = None) -> Fixture:
    """Register a fixture: `base` plus `files`.

    Args:
        name: a new fixture name.
        files: {"/path": content}; a path ending in / is a directory. A content may also be a
            dict: {"content": ..., "mode": 0o755} (a file with its mode), {"symlink": target}
            or {"dir": True, "mode": 0o700}. A symlink may not point above the fixture root,
            and no path may lie under a symlink (writing it would follow the link).
        env: environment variables added to the base fixture's.
        base: the fixture to start from.
        users: accounts the image carries ([{"name", "uid", "home", "shell", "sudo", "groups"}],
            _accounts.parse_users): their /etc lines, sudo rights and home directories; a fixture
            with users runs in sysadmin mode.
        image: the task image its commands see under /usr and /etc (images.check_image), else
            the base's (the host's).
    """
    from verifirst.verifiers.bash._accounts import parse_users
    from verifirst.verifiers.bash.images import check_image

    declared = parse_users(users)
    image = check_image(image) if image is not None else build(base).image
    if not name or name in _BUILDERS:
        raise InputError(f"fixture name {name!r} is empty or built in", field="fixture", expected="a new name")
    t = _Tree()
    for e in build(base).entries:
        t.items[e.path] = e
    for path, content in sorted(files.items()):
        if not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/"):
            raise InputError(f"fixture path {path!r} must be absolute without '..'", field="files")
        _add(t, path, content, where=f"files[{path!r}]")
    for u in declared:  # a home of its own, unless the files give one
        home = u.home.lstrip("/")
        parts = home.split("/")
        for i in range(1, len(parts)):
            t.items.setdefault("/".join(parts[:i]), Entry("/".join(parts[:i]), "dir", 0o755))
        t.items.setdefault(home, Entry(home, "dir", 0o755))
        for path, e in list(t.items.items()):
            if path == home or path.startswith(home + "/"):
                t.items[path] = dataclasses.replace(e, uid=u.uid)
    fx = Fixture(name, t.entries(), dict(build(base).env, **(env or {})), f"{base} + {len(files)} files",
                 sysadmin=build(base).sysadmin or bool(declared), users=declared, image=image)
    _CACHE[name] = fx
    return fx


def resolve(fixture: str | Fixture) -> Fixture:
    return fixture if isinstance(fixture, Fixture) else build(fixture)


def cache_root() -> Path:
    from verifirst.verifiers.bash.images import cache_base

    return cache_base() / "fixtures"


def write_tree(fx: Fixture, root: str | os.PathLike, owner: tuple[int, int] | None = None) -> None:
    """Write the fixture under `root` (which must exist): content, modes, mtimes; chown if asked."""
    root = os.fspath(root)
    dirs: list[tuple[str, Entry]] = []
    for e in fx.entries:
        p = os.path.join(root, e.path)
        if e.kind == "dir":
            os.mkdir(p)
            dirs.append((p, e))
        elif e.kind == "file":
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                if e.data:
                    os.write(fd, e.data)
                if owner:
                    os.fchown(fd, owner[0] + e.uid, owner[1] + e.uid)
                os.fchmod(fd, e.mode)
            finally:
                os.close(fd)
            t = resolve_mtime(e.mtime)
            os.utime(p, (t, t))
            continue
        else:
            os.symlink(e.data.decode(), p)
        if owner:  # a declared user's uid is its own inside the sysadmin namespace (owner + uid here)
            os.lchown(p, owner[0] + e.uid, owner[1] + e.uid)
    for p, e in reversed(dirs):  # children first, so creating them does not bump parents
        os.chmod(p, e.mode)
        t = resolve_mtime(e.mtime)
        os.utime(p, (t, t))


def materialize(name: str | Fixture) -> Path:
    """The fixture written once under the cache, keyed by its content hash; returns its root."""
    fx = resolve(name)
    dest = cache_root() / f"{fx.name}-{fx.content_hash[:16]}"
    return publish_dir(dest, lambda tmp: write_tree(fx, tmp), prefix=f".{fx.name}.")


# ---- fixtures from a task directory --------------------------------------------------------

TASK_DIR_LIMIT = 64 << 20  # bytes of file content a task directory may bring into a fixture


def _escapes(rel: str, target: str) -> bool:
    """Whether a relative link at `rel` (relative to a root) resolves above that root."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined == ".." or joined.startswith("../")


def _add(t: _Tree, path: str, content: str | bytes | dict, where: str) -> None:
    """One `custom()` entry into the tree; `where` names it in errors."""
    rel = path.strip("/")
    parts = rel.split("/")
    for k in range(1, len(parts)):
        above = t.items.get("/".join(parts[:k]))
        if above is not None and above.kind == "symlink":
            raise InputError(f"{path} lies under the symlink /{above.path}: writing it would follow the link",
                             field=where, expected="paths under directories, not under symlinks")
    if not isinstance(content, dict):
        if path.endswith("/"):
            t.dir(rel)
        else:
            t.file(rel, content)
        return
    mode = content.get("mode", 0o755 if content.get("dir") else 0o644)
    if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777:
        raise InputError(f"bad mode {mode!r}", field=f"{where}.mode", expected="an integer 0..0o7777, e.g. 0o755")
    if "symlink" in content:
        target = str(content["symlink"])
        if not target or _escapes(rel, target):
            raise InputError(f"symlink {path} -> {target!r} points above the fixture root",
                             field=f"{where}.symlink", expected="a target inside the fixture")
        if any(k.startswith(rel + "/") for k in t.items):
            raise InputError(f"symlink {path} would hide the entries under it", field=where,
                             expected="a path with nothing under it")
        t.symlink(rel, target)
    elif content.get("dir"):
        t.dir(rel, mode)
    elif "content" in content:
        data = content["content"]
        if not isinstance(data, (str, bytes)):
            raise InputError(f"content of {path} is {type(data).__name__}", field=f"{where}.content",
                             expected="text or bytes")
        t.file(rel, data, mode)
    else:
        raise InputError(f"entry {path} says neither content, symlink nor dir", field=where,
                         expected='{"content": ..., "mode": 0o755}, {"symlink": "target"} or {"dir": true}')


def _leaves_tree(rel: str, target: str, mount: str | None) -> bool:
    """Whether a link at `rel` in a tree mounted at `mount` points out of the tree. A relative
    target is resolved from the link's directory; an absolute one against the mount point
    (`downloads/l -> /home/test/f` in a tree mounted at /home stays inside). Without a mount
    point every absolute target leaves the tree."""
    if not os.path.isabs(target):
        return _escapes(rel, target)
    if mount is None:
        return True
    at = "/" + mount.strip("/")
    t = posixpath.normpath("/" + target.lstrip("/"))
    return at != "/" and t != at and not t.startswith(at + "/")


def read_task_dir(src: str | os.PathLike, exclude: tuple[str, ...] = (),
                  mount: str | None = None) -> dict[str, dict]:
    """A task directory as custom() entries: files with their modes, directories, and symlinks.

    Symlinks are kept as links (never followed, targets as written); one that leaves the tree
    is refused (see _leaves_tree), as is anything that is not a file, directory or symlink.

    Args:
        src: the directory to read.
        exclude: relative paths (as "a/b") left out, with everything under them.
        mount: where the tree is mounted in the fixture ("/home"); absolute link targets are
            resolved against it. None: absolute links are refused.

    Returns:
        {"rel/path": {"content": bytes, "mode": int} | {"symlink": target} | {"dir": True, "mode": int}}.

    Raises:
        InputError: naming the offending path.
    """
    root = Path(src)
    if not root.is_dir():
        raise InputError("task directory not found", path=str(root), expected="a directory")
    out: dict[str, dict] = {}
    total = 0
    stack = [(root, "")]
    while stack:
        d, rel = stack.pop()
        with os.scandir(d) as it:
            ents = sorted(it, key=lambda e: e.name)
        for ent in ents:
            r = f"{rel}/{ent.name}" if rel else ent.name
            if r in exclude:
                continue
            st = ent.stat(follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(ent.path)
                if _leaves_tree(r, target, mount):
                    where = f" mounted at {mount}" if mount and os.path.isabs(target) else ""
                    raise InputError(f"symlink points outside the task directory{where} ({target!r})",
                                     path=ent.path, expected="a link to something inside the task directory")
                out[r] = {"symlink": target}
            elif stat.S_ISDIR(st.st_mode):
                out[r] = {"dir": True, "mode": mode}
                stack.append((Path(ent.path), r))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > TASK_DIR_LIMIT:
                    raise InputError(f"task directory holds more than {TASK_DIR_LIMIT >> 20} MiB", path=ent.path)
                out[r] = {"content": Path(ent.path).read_bytes(), "mode": mode}
            else:
                raise InputError("not a file, directory or symlink", path=ent.path,
                                 expected="regular files, directories and symlinks")
    return out


def from_dir(name: str, src: str | os.PathLike, dest: str = "/", *, base: str = "empty",
             env: dict[str, str] | None = None, exclude: tuple[str, ...] = (),
             extra: dict[str, str | bytes | dict] | None = None, users: list[dict] | None = None,
             image: dict | None = None) -> Fixture:
    """Register a fixture: `base` plus the task directory `src` placed at `dest` (modes,
    executables and symlinks kept; see read_task_dir) plus `extra` entries as in custom().

    Args:
        name: a new fixture name.
        src: the task directory.
        dest: where its contents go in the fixture ("/app", "/home").
        base: the fixture to start from.
        env: environment variables added to the base's.
        exclude: relative paths of `src` left out (the task's prompt, its gold script).
        extra: more entries, {"/abs/path": content} as custom() takes them.
        users, image: as custom() takes them.
    """
    prefix = "/" + dest.strip("/")
    files: dict[str, str | bytes | dict] = {}
    if prefix != "/":
        files[prefix + "/"] = {"dir": True, "mode": 0o755}
    for rel, spec in read_task_dir(src, exclude, mount=prefix).items():
        files[(prefix.rstrip("/") + "/" + rel)] = spec
    files.update(extra or {})
    return custom(name, files, env=env, base=base, users=users, image=image)


def from_spec(name: str, spec: dict) -> Fixture:
    """Register a fixture from a JSON-able spec: {"src", "dest", "base", "exclude", "extra", "users",
    "image"} (from_dir) or {"files", "base", "users", "image"} (custom).

    Args:
        name: the fixture name.
        spec: the arguments, as a task loader records them in gold["fixture_spec"].
    """
    if "src" in spec:
        return from_dir(name, spec["src"], spec.get("dest", "/"), base=spec.get("base", "empty"),
                        exclude=tuple(spec.get("exclude", ())), extra=spec.get("extra"), users=spec.get("users"),
                        image=spec.get("image"))
    return custom(name, spec.get("files", {}), base=spec.get("base", "empty"), users=spec.get("users"),
                  image=spec.get("image"))


def ensure(fixture: str | Fixture, spec: dict | None = None) -> str | Fixture:
    """The fixture, registered first from `spec` when this process has not built it (a worker
    process receives items whose fixtures were registered in the parent).

    Args:
        fixture: the fixture name (or a Fixture, returned as is).
        spec: see from_spec(), or None.
    """
    if isinstance(fixture, Fixture) or not spec or fixture in _CACHE or fixture in _BUILDERS:
        return fixture
    from_spec(fixture, spec)
    return fixture
