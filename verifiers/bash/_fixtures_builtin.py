"""The built-in fixtures: an Ubuntu container's skeleton plus the NL2SH-ALFA (icalfa) and
InterCode-Bash file systems, written from the published descriptions of their Docker images (same
paths, contents, modes and old timestamps), and the table of their builders."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Callable

from verifirst.verifiers.bash._fixtures_tree import (DAY, MOUNT_POINTS, Ago, Entry, _gzip, _Tree, echo, echo_e,
                                                     utc)


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
