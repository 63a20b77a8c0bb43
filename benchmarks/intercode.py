"""InterCode-Bash from a path: nl2bash_fs_N.json (N=1..4, fixture "intercode-fsN") and
test_queries.json (runs in /testbed, i.e. fixture "intercode-fs1" unless told otherwise)."""
from __future__ import annotations

import re
from pathlib import Path

from verifirst.core.errors import InputError
from verifirst.core.task import Item, Suite

from .nl2sh import json_array_with_lines, require_str

_FS_FILE = re.compile(r"^nl2bash_fs_(\d+)\.json$")
TEST_QUERIES = "test_queries.json"


def load_intercode(path: str | Path, *, include_test_queries: bool = True,
                   test_queries_fixture: str = "intercode-fs1") -> Suite:
    d = Path(path)
    if not d.is_dir():
        raise InputError("InterCode-Bash data dir not found", path=str(d),
                         expected="a dir with nl2bash_fs_1.json .. nl2bash_fs_4.json")
    fs_files = sorted((int(m.group(1)), f) for f in d.iterdir() if (m := _FS_FILE.match(f.name)))
    if not fs_files:
        raise InputError("no nl2bash_fs_N.json in the dir", path=str(d),
                         expected="nl2bash_fs_1.json .. nl2bash_fs_4.json")
    items: list[Item] = []
    for n, f in fs_files:
        items += _load_file(f, f"intercode-fs{n}", f"intercode-fs{n}")
    tq = d / TEST_QUERIES
    if include_test_queries and tq.exists():
        items += _load_file(tq, test_queries_fixture, "intercode-test")
    return Suite("intercode-bash", items, description="InterCode-Bash (princeton-nlp/intercode)",
                 meta={"source": str(d)})


def _load_file(f: Path, fixture: str, prefix: str) -> list[Item]:
    out = []
    for j, (line, row) in enumerate(json_array_with_lines(f)):
        q = require_str(row, "query", path=str(f), line=line, index=j)
        g = require_str(row, "gold", path=str(f), line=line, index=j)
        iid = f"{prefix}-{j:03d}"
        out.append(Item(id=iid, inputs={"task": q}, gold={"command": g, "fixture": fixture},
                        group=iid, meta={"source": str(f), "line": line}))
    return out
