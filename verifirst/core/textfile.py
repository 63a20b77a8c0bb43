"""Reading a user's text file with an error that names it: the one reader every loader uses.

read_text decodes (a UTF-8 byte-order mark is dropped: editors on Windows write one), lines()
numbers lines the way an editor and a JSON Lines file mean them (only \\n, \\r\\n and \\r end a
line: str.splitlines() also breaks at U+2028, U+2029 and U+0085, which JSON allows raw inside a
string), and read_jsonl parses one JSON value per line with errors that name the line.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

from verifirst.core.errors import InputError

BOM = "\ufeff"
_LINE_END = re.compile(r"\r\n|\r|\n")
EXPECTED_JSONL = "one JSON object per line"


def read_text(path: str | Path, what: str = "file", error: type[InputError] = InputError) -> str:
    """A UTF-8 text file's contents without a leading byte-order mark, or an InputError naming the
    file and why it cannot be read (missing, a directory, a symlink loop, not UTF-8, binary,
    unreadable).

    Args:
        path: the file.
        what: what the file is, for the message ("experiment file", "outcomes file").
        error: the InputError subclass raised.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if path.is_symlink():
            raise error(f"{what} is a broken symbolic link", path=str(path)) from None
        raise error(f"{what} not found", path=str(path)) from None
    except IsADirectoryError:
        raise error(f"{what} is a directory", path=str(path), expected="a file") from None
    except OSError as e:  # a symlink loop (ELOOP), no permission, an unreadable device
        raise error(f"cannot read {what}: {e.strerror or e}", path=str(path), expected="a readable file") \
            from None
    if b"\x00" in data:
        raise error(f"{what} is binary (it holds NUL bytes)", path=str(path), expected="a UTF-8 text file")
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(f"{what} is not UTF-8 (byte 0x{data[e.start]:02x})", path=str(path), line=line,
                    expected="a UTF-8 text file (re-save it as UTF-8)") from None


def lines(text: str) -> list[str]:
    """The text's lines as an editor numbers them (line n is lines(text)[n - 1]).

    Args:
        text: a file's text; a leading byte-order mark is dropped.
    """
    text = text.removeprefix(BOM)
    out = _LINE_END.split(text)
    if out and out[-1] == "" and len(out) > 1:  # a final newline ends the last line, it opens none
        out.pop()
    return out if text else []


def iter_jsonl(text: str, path: str | None, error: type[InputError] = InputError,
               expected: str = EXPECTED_JSONL) -> Iterator[tuple[int, dict]]:
    """(line, object) for each non-blank line of a JSON Lines text.

    Args:
        text: the file's text (read_text's).
        path: the file, named in errors.
        error: the InputError subclass raised.
        expected: what a line should hold, for the message.

    Raises:
        InputError: a line that is not JSON, or JSON that is not an object, naming the line.
    """
    for n, raw in enumerate(lines(text), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as e:
            raise error(f"malformed JSON: {e.msg} at column {e.colno}", path=path, line=n,
                        expected=expected) from None
        except RecursionError:  # thousands of nested brackets
            raise error("JSON nested too deeply", path=path, line=n, expected=expected) from None
        if not isinstance(rec, dict):
            raise error(f"line holds a JSON {type(rec).__name__}, not an object", path=path, line=n,
                        expected=expected)
        yield n, rec


def read_jsonl(path: str | Path, what: str = "file", error: type[InputError] = InputError) -> list[tuple[int, dict]]:
    """[(line, object)] of a JSON Lines file (read_text's checks, then iter_jsonl's).

    Args:
        path: the file.
        what: what the file is, for the message.
        error: the InputError subclass raised.
    """
    return list(iter_jsonl(read_text(path, what, error), str(path), error))
