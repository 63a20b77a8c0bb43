"""Pull Terraform HCL out of model output: fenced blocks, prose around code, cut-off fences."""
from __future__ import annotations

import re

TOP_KEYWORDS = ("resource", "data", "provider", "terraform", "variable", "output", "locals",
                "module", "moved", "import", "check")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*$", re.M)
# a top-level block header: keyword, labels, then the opening brace on the same line
_TOP = re.compile(r'^[ \t]*(' + "|".join(TOP_KEYWORDS) + r')((?:[ \t]+"[^"\n]*"|[ \t]+[A-Za-z_][\w-]*)*)[ \t]*\{', re.M)
_HCL_LANGS = {"", "hcl", "terraform", "tf", "hcl2"}


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block; an unclosed last fence runs to the end."""
    out, pos = [], 0
    while True:
        m = _FENCE.search(text, pos)
        if not m:
            return out
        fence, lang = m.group(1), m.group(2).lower()
        start = m.end() + 1
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", re.M)
        c = close.search(text, start)
        body = text[start:c.start()] if c else text[start:]
        out.append((lang, body))
        if not c:
            return out
        pos = c.end()


def _looks_like_hcl(body: str) -> bool:
    return bool(_TOP.search(body))


def _balanced_span(text: str, start: int) -> int:
    """Index just past the block opened on the line at `start`; strings, comments and heredocs
    are skipped so braces inside them do not count. -1 when the block never closes."""
    depth, i, n = 0, start, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == "#" or text.startswith("//", i):
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif text.startswith("<<", i):
            m = re.match(r"<<-?([A-Za-z_][A-Za-z0-9_]*)[ \t]*\n", text[i:])
            if m:
                end = re.compile(r"^[ \t]*" + m.group(1) + r"[ \t]*$", re.M).search(text, i + m.end())
                i = n if not end else end.end()
                continue
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _unfenced_blocks(text: str) -> list[str]:
    blocks, pos = [], 0
    while True:
        m = _TOP.search(text, pos)
        if not m:
            return blocks
        line_start = m.start()
        end = _balanced_span(text, line_start)
        if end < 0:  # cut off mid-block: keep what there is, the verifier reports it
            blocks.append(text[line_start:].rstrip())
            return blocks
        blocks.append(text[line_start:end].strip("\n"))
        pos = end


def extract_hcl(text: str | None) -> str:
    """The HCL in `text`, or "" when there is none.

    Fenced blocks tagged hcl/terraform/tf (or untagged ones that look like HCL) win and are
    joined in order; otherwise top-level blocks are cut out of the prose by brace matching.
    """
    if not text:
        return ""
    text = text.replace("\r\n", "\n")
    fenced = [b for lang, b in _fenced_blocks(text)
              if (lang in _HCL_LANGS and _looks_like_hcl(b)) or (lang in ("hcl", "terraform", "tf") and b.strip())]
    if fenced:
        return "\n\n".join(b.strip("\n") for b in fenced).strip() + "\n"
    blocks = _unfenced_blocks(text)
    if blocks:
        return "\n\n".join(blocks).strip() + "\n"
    return ""
