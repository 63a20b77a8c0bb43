"""NL2Bash-EAbench (IBM/nl2bash-eabench) from a user path, in its public layout.

<root>/bash_1 (basic), bash_2 (system), bash_3 (multi-line scripts); inside each suite one
directory per test holding `prompt` (task text), `bash.sh` (ground-truth script) and optionally
`name` and `prerequisite.sh`. Directories without `prompt` (bin/, containers/) are not tests.
A few upstream tests keep their script under another name: they are listed in
suite.meta["no_gold"] and left out, or raise with strict=True.
"""
from __future__ import annotations

import re
from pathlib import Path

from verifirst.errors import InputError
from verifirst.task import Item, Suite

SUITES = ("bash_1", "bash_2", "bash_3")
SUITE_KIND = {"bash_1": "basic", "bash_2": "system", "bash_3": "multi-line scripts"}


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _read(p: Path, what: str, required: bool = True) -> str | None:
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise InputError(f"missing {what}", path=str(p), expected=f"a `{p.name}` file") from None
        return None
    except UnicodeDecodeError as e:
        raise InputError(f"{what} is not UTF-8 (byte {e.start})", path=str(p), line=1) from None
    if required and not text.strip():
        raise InputError(f"{what} is empty", path=str(p), line=1, field=p.name, expected="non-empty text")
    return text


def load_eabench(path: str | Path, suites: tuple[str, ...] | None = None, *, strict: bool = False,
                 fixture: str = "empty") -> Suite:
    """All tests of the chosen suites (default: those present). `path` may be the repo root or
    one suite dir (named bash_N)."""
    root = Path(path)
    if not root.is_dir():
        raise InputError("NL2Bash-EAbench dir not found", path=str(root),
                         expected="the repo root holding bash_1/ bash_2/ bash_3/")
    if root.name in SUITES:
        root, present = root.parent, [root.name]
    else:
        present = [s for s in SUITES if (root / s).is_dir()]
    if suites is not None:
        unknown = [s for s in suites if s not in SUITES]
        if unknown:
            raise InputError(f"unknown suite {unknown[0]!r}", field="suites", expected=", ".join(SUITES))
        missing = [s for s in suites if s not in present]
        if missing:
            raise InputError(f"suite {missing[0]} not found", path=str(root / missing[0]),
                             expected="a directory per suite")
        present = list(suites)
    if not present:
        raise InputError("no suite dirs", path=str(root), expected="bash_1/, bash_2/ or bash_3/")
    items: list[Item] = []
    no_gold: list[str] = []
    for s in present:
        for t in sorted((d for d in (root / s).iterdir() if d.is_dir()), key=lambda d: _natural(d.name)):
            has_prompt, has_gold = (t / "prompt").exists(), (t / "bash.sh").exists()
            if not has_prompt:
                if has_gold:
                    raise InputError("test has bash.sh but no prompt", path=str(t / "prompt"),
                                     expected="a `prompt` file with the task text")
                continue
            iid = f"eabench-{s}-{t.name}"
            if not has_gold:
                if strict:
                    raise InputError("test has no ground-truth script", path=str(t / "bash.sh"),
                                     expected="a `bash.sh` file")
                no_gold.append(iid)
                continue
            items.append(_item(iid, s, t, fixture))
    return Suite("nl2bash-eabench", items, description="NL2Bash-EAbench (IBM)",
                 meta={"source": str(root), "suites": present, "no_gold": no_gold})


def _item(iid: str, suite: str, t: Path, fixture: str) -> Item:
    prompt = _read(t / "prompt", "prompt").strip()
    script = _read(t / "bash.sh", "bash.sh")
    gold = {"command": script, "fixture": fixture, "suite": suite}
    pre = _read(t / "prerequisite.sh", "prerequisite.sh", required=False)
    if pre is not None and pre.strip():
        gold["prerequisite"] = pre
    name = _read(t / "name", "name", required=False)
    meta = {"suite": suite, "kind": SUITE_KIND[suite], "path": str(t)}
    if name and name.strip():
        meta["name"] = name.strip()
    return Item(id=iid, inputs={"task": prompt}, gold=gold, group=iid, meta=meta)
