"""Pull the bash command out of mixed model output (prose, fences, prompts, backticks).

Reflection agents often answer with reasoning around the code; S0 extracted it by hand.
`extract_command` tries, in order: fenced blocks, `$ ` prompt lines, labelled lines
("Command: ..."), inline backticks, then the last stretch of non-prose lines that parses.
A failure is reported (ok=False), never hidden; `ExtractionStats` counts them per caller.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_SHELL_TAGS = {"", "bash", "sh", "shell", "console", "zsh", "shellscript", "terminal"}
_PROMPT_RE = re.compile(r"^\s*\$\s+(\S.*)$")
_LABEL_RE = re.compile(r"^\s*(?:\*\*)?(?:final\s+|corrected\s+|revised\s+|fixed\s+|improved\s+)?"
                       r"(?:command|answer|bash|solution|code|script)(?:\*\*)?\s*[:=]\s*(?:\*\*)?\s*(\S.*)$", re.I)
_INLINE_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_FUNC_RE = re.compile(r"^(?:function\s+)?[A-Za-z_][A-Za-z0-9_]*\s*\(\)\s*\{")
_KEYWORDS = {
    "for", "while", "until", "if", "case", "function", "select", "time", "{", "(", "((", "[[", "[",
    "echo", "printf", "cd", "export", "read", "source", ".", "eval", "exec", "set", "unset", "trap",
    "declare", "local", "let", "test", "alias", "type", "ulimit", "umask", "wait", "kill", "shopt",
    "pushd", "popd", "true", "false", "exit", "return", "mapfile", "readarray", "getopts", "shift",
}
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PROSE_START = re.compile(r"^(?:the|this|that|these|here|it|to|you|we|i|in|note|explanation|"
                          r"however|also|then|first|finally|yes|no|sure|okay|ok|or|and)\b", re.I)
_SHELL_CHARS = re.compile(r"[|;&<>$=`{}()]")


@dataclass(frozen=True)
class Extraction:
    command: str | None
    method: str  # fence | prompt | label | inline | line | none
    ok: bool

    def as_dict(self) -> dict:
        return {"command": self.command, "method": self.method, "ok": self.ok}


@dataclass
class ExtractionStats:
    """Thread-safe counters of extraction outcomes by method."""

    by_method: dict = field(default_factory=dict)
    failures: int = 0
    total: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, ex: Extraction) -> None:
        with self._lock:
            self.total += 1
            self.by_method[ex.method] = self.by_method.get(ex.method, 0) + 1
            if not ex.ok:
                self.failures += 1

    def as_dict(self) -> dict:
        return {"total": self.total, "failures": self.failures, "by_method": dict(self.by_method)}


def _first_word(line: str) -> str:
    words = line.strip().split()
    while words and _ASSIGN_RE.match(words[0]):  # VAR=value cmd ...
        words = words[1:]
    if not words:
        return ""
    w = words[0]
    for opener in ("((", "[[", "{", "(", "!"):
        if w.startswith(opener) and w != opener:
            return opener
    return w


def looks_like_command(line: str) -> bool:
    """A line whose first word is a shell keyword/builtin, a path, or a program on PATH."""
    s = line.strip()
    if not s or (_PROSE_START.match(s) and not _SHELL_CHARS.search(s)):
        return False
    w = _first_word(s)
    if not w:
        return False
    if w in _KEYWORDS or w.startswith(("./", "/", "~/")) or _FUNC_RE.match(s):
        return True
    return bool(re.fullmatch(r"[A-Za-z0-9_.+\-]+", w)) and shutil.which(w, path=_PATH) is not None


def _is_prose(line: str) -> bool:
    s = line.strip()
    if not s or looks_like_command(s):
        return False
    if _PROSE_START.match(s):
        return True
    return len(s.split()) >= 3 and s[-1] in ".:!?" and not _SHELL_CHARS.search(s)


def parses(command: str) -> bool:
    """`bash -n`: syntax only, nothing runs."""
    try:
        r = subprocess.run(["bash", "-n", "-c", command], capture_output=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _prompt_lines(lines: list[str]) -> list[str]:
    return [m.group(1).strip() for m in map(_PROMPT_RE.match, lines) if m]


def _strip_prompts(block: str) -> str:
    lines = block.strip("\n").splitlines()
    prompted = _prompt_lines(lines)
    if prompted:  # a console transcript: keep the commands, drop their output
        return "\n".join(prompted)
    return "\n".join(l.rstrip() for l in lines).strip()


def _unquote(cmd: str) -> str:
    cmd = cmd.strip()
    inline = _INLINE_RE.findall(cmd)
    return inline[-1].strip() if inline else cmd


def extract_command(text: str | None) -> Extraction:
    """The command in `text`, and how it was found; ok=False when none is recognisable."""
    if text is None or not str(text).strip():
        return Extraction(None, "none", False)
    text = str(text).strip()

    blocks = [_strip_prompts(body) for tag, body in _FENCE_RE.findall(text)
              if tag.lower() in _SHELL_TAGS and body.strip()]
    if blocks:  # the last block is the final answer when the model quotes the old one first
        return Extraction(blocks[-1], "fence", True)

    lines = text.splitlines()
    prompted = _prompt_lines(lines)
    if prompted:
        return Extraction("\n".join(prompted), "prompt", True)

    for line in reversed(lines):
        m = _LABEL_RE.match(line)
        if m:
            cand = _unquote(m.group(1))
            if looks_like_command(cand):
                return Extraction(cand, "label", True)

    inline = [c.strip() for c in _INLINE_RE.findall(text) if looks_like_command(c)]
    if inline:
        return Extraction(inline[-1], "inline", True)

    segments, cur = [], []
    for line in lines:
        if _is_prose(line):
            segments.append(cur)
            cur = []
        else:
            cur.append(line.rstrip())
    segments.append(cur)
    for seg in reversed(segments):  # the last runnable stretch is the final answer
        body = "\n".join(seg).strip()
        first = next((l for l in seg if l.strip() and not l.lstrip().startswith("#")), "")
        if first and looks_like_command(first) and parses(body):
            return Extraction(body, "line", True)
    for line in reversed(lines):
        if looks_like_command(line) and parses(line):
            return Extraction(line.strip(), "line", True)
    return Extraction(None, "none", False)
