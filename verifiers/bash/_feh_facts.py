"""The facts a short output states (issue 37): numbers, dates, clock and Unix times, versions,
names, paths, zones and permission strings, normalised so that one fact told two ways (2023-11-14
and `Nov 14 2023`, -rw-r--r-- and 644, 80K and du's 80, /testbed/a.txt and ./a.txt) is one.

FEH's comparison (_feh_compare) reads fact_difference() of two observed outputs: short outputs
that each state a fact the other does not pass no similarity rule.
"""
from __future__ import annotations

import re
from collections import Counter

_CLOCK = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\.\d+)?(?![\d:])")
_SEP = re.compile(r"(?:[\s,;:=()\[\]{}<>\"'`|\\]|-{2,})+")  # -- and --- join tree and pstree parts
_PERM = re.compile(r"(?<![\w-])[-dlcbps]?([-r][-w][-xsS])([-r][-w][-xsS])([-r][-w][-xtT])[.+@]?(?![\w-])")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)[KMGTP](?:i?B)?$|^(\d+(?:\.\d+)?)[KMGTP]i$")  # du -h, ls -lh, free -h
_UTC = re.compile(r"^(?:[+-]0000|gmt|utc|z)$", re.IGNORECASE)
_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d+)?$")
_INNER = re.compile(r"\w[._@/-]\w")  # file names, versions, hosts, user@host, zones (Europe/Paris)
_ISO_DATE = re.compile(r"(?<!\d)((?:19|20)\d\d)-(\d\d)-(\d\d)(?!\d)")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
# `Tue Nov 14 ... 2023`, `14 Nov 2023`: month day or day month, the year later on the line
_NAMED_DATE = re.compile(r"\b(?:" + _MONTH + r"\s+(\d{1,2})|(\d{1,2})\s+" + _MONTH + r")\b(.*?)\b((?:19|20)\d\d)\b",
                         re.IGNORECASE)
# a version with a suffix or of three parts or more, kept whole: 5.2.15(1)-release, 6.1.0-18-amd64
_VERSION = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?:\(\d+\))?[-+~][\w.~+-]*\w|(?<![\w.])\d+(?:\.\d+){2,}(?:\(\d+\))?")
_EPOCH = re.compile(r"^1\d{9}$")  # Unix time in seconds (2001..2286)
CLOCK_SLACK_S = 120  # two runs of `date` a few seconds apart state the same time


def _norm(s: str) -> str:
    return "\n".join(line.rstrip() for line in s.replace("\r\n", "\n").split("\n")).strip("\n")


def facts(text: str) -> set[str]:
    """The facts an output states, normalised: numbers (leading zeros and trailing decimal zeros
    dropped), dates (as `d:YYYY-MM-DD`), clock times (as `t:SECONDS`), Unix times (`e:`), versions, paths, zone names, permission strings (as
    octal), all-capital words (UTC, EST), and names: every word of a line that is data rather
    than prose (at most two words, or fields split by `:`, `=`, tabs, parentheses or `--`, as in
    /etc/group, `key: value`, `uid=0(root)` or a process tree).
    Words of a prose line are not facts (the same result is worded many ways).

    Args:
        text: the observed output.
    """
    out: set[str] = set()
    for line in _norm(text).split("\n"):
        line = _NAMED_DATE.sub(lambda m: _named_date(m, out), _ISO_DATE.sub(lambda m: _date(out, *m.groups()), line))
        for m in _CLOCK.finditer(line):
            h, mi, se = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
            if h < 24 and mi < 60 and se < 61:
                out.add(f"t:{h * 3600 + mi * 60 + se}")
        rest = _CLOCK.sub(" ", line)
        out.update(m.group(0).lower() for m in _VERSION.finditer(rest))
        rest = _VERSION.sub(" ", rest)
        for m in _PERM.finditer(rest):  # -rw-r--r-- and 644 state the same mode
            if re.search("[rwx]", m.group(0)):
                out.add(_number(_octal(m.group(1) + m.group(2) + m.group(3))))
        rest = _PERM.sub(" ", rest)
        toks = [_token(t) for t in _SEP.split(rest)]
        toks = [t for t in toks if any(ch.isalnum() for ch in t)]
        data = len(toks) <= 2 or bool(re.search(r"[:=()]|\t|-{2,}", rest))
        for t in toks:
            if _EPOCH.match(t):
                out.add(f"e:{t}")
            elif _NUMBER.match(t):
                out.add(_number(t))
            elif data or any(ch.isdigit() for ch in t) or _INNER.search(t) or (t.isupper() and len(t) > 1):
                out.add(t.lower())
    return out


def _token(t: str) -> str:
    """One token as a fact: drawing characters and end punctuation off, a path without its
    trailing slash, a size without its unit (80K is du's 80), a zero UTC offset as UTC."""
    t = t.strip("_~#*").rstrip(".!?")
    if len(t) > 1:
        t = t.rstrip("/")
    m = _SIZE.match(t)
    if m:
        return m.group(1) or m.group(2)
    return "UTC" if _UTC.match(t) else t


def _date(out: set, y: str, m: str, d: str) -> str:
    """Record a date as `d:YYYY-MM-DD` (2023-11-14 and `Nov 14 2023` state the same day)."""
    out.add(f"d:{y}-{int(m):02d}-{int(d):02d}")
    return " "


def _named_date(m: re.Match, out: set) -> str:
    mon = (m.group(1) or m.group(4)).lower()[:3]
    day = m.group(2) or m.group(3)
    _date(out, m.group(6), str(_MONTHS.index(mon) + 1), day)
    return " " + m.group(5) + " "  # what lay between (a clock time, a zone) stays


def _octal(perm: str) -> str:
    """rwxr-xr-x -> 755 (set-id and sticky bits aside: `ls` and `stat -c %a` say them differently)."""
    return "".join(str(sum(b for ch, b in zip(perm[i:i + 3], (4, 2, 1)) if ch not in "-ST")) for i in (0, 3, 6))


def _number(t: str) -> str:
    if "." in t:
        t = t.rstrip("0").rstrip(".")
    sign = "-" if t.startswith("-") else ""
    t = t.lstrip("+-").lstrip("0") or "0"
    return sign + ("0" + t if t.startswith(".") else t)


def fact_difference(a: str, b: str) -> dict:
    """facts_gold_only / facts_cand_only for two observed outputs, read from the lines that
    differ: lines both print (a driver's preamble, a header, the expected value announced
    first) state nothing that tells the two apart.

    Args:
        a: the reference's observed output.
        b: the candidate's observed output.

    Returns:
        facts_gold_only, facts_cand_only (sorted tuples) and the counts of lines only in a, only
        in b, and in both (PairFeatures fields of the same names).
    """
    la, lb = Counter(_norm(a).split("\n")), Counter(_norm(b).split("\n"))
    la[""] = lb[""] = 0
    fa, fb = facts("\n".join((la - lb).elements())), facts("\n".join((lb - la).elements()))
    return {"facts_gold_only": tuple(sorted(_unmatched(fa, fb))), "facts_cand_only": tuple(sorted(_unmatched(fb, fa))),
            "lines_gold_only": sum((la - lb).values()), "lines_cand_only": sum((lb - la).values()),
            "lines_shared": sum((la & lb).values())}


def _unmatched(a: set[str], b: set[str]) -> set[str]:
    """The facts of `a` that `b` does not state (clock and Unix times within CLOCK_SLACK_S, and
    paths that name the same file relative to another directory, count as stated)."""
    clocks = [int(x[2:]) for x in b if x.startswith("t:")]
    epochs = [int(x[2:]) for x in b if x.startswith("e:")]
    paths = [y.removeprefix("./") for y in b if "/" in y or "." in y]
    out = set()
    for x in a - b:
        if "/" in x or "." in x:
            # one file named from two places: /testbed/dir1/a.txt, ./dir1/a.txt, a.txt
            p = x.removeprefix("./")
            if any(p == y or p.endswith("/" + y) or y.endswith("/" + p) for y in paths):
                continue
        s = int(x[2:]) if x[:2] in ("t:", "e:") else None
        if x.startswith("t:") and any(min(abs(s - c), 86400 - abs(s - c)) <= CLOCK_SLACK_S for c in clocks):
            continue
        if x.startswith("e:") and any(abs(s - c) <= CLOCK_SLACK_S for c in epochs):
            continue
        out.add(x)
    return out


def facts_text(fs: tuple, n: int = 8) -> str:
    """Facts for the feedback, as an output would print them (clock times as HH:MM:SS)."""
    shown = [f"{int(x[2:]) // 3600:02d}:{int(x[2:]) // 60 % 60:02d}:{int(x[2:]) % 60:02d}" if x.startswith("t:")
             else x[2:] if x[:2] in ("d:", "e:") else x for x in fs[:n]]
    return ", ".join(shown) + (f" and {len(fs) - n} more" if len(fs) > n else "")
