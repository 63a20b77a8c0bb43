"""Reading a user's text file with an error that names it: the one reader every loader uses."""
from __future__ import annotations

from pathlib import Path

from verifirst.core.errors import InputError


def read_text(path: str | Path, what: str = "file", error: type[InputError] = InputError) -> str:
    """A UTF-8 text file's contents, or an InputError naming the file and why it cannot be read
    (missing, a directory, a symlink loop, not UTF-8, binary, unreadable).

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
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(f"{what} is not UTF-8 (byte 0x{data[e.start]:02x})", path=str(path), line=line,
                    expected="a UTF-8 text file (re-save it as UTF-8)") from None
