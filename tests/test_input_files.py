"""Every loader reads its file through one reader: a directory, a symlink loop, binary or
non-UTF-8 bytes are an InputError naming the file (and the line for non-UTF-8), never a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

from verifirst.benchmarks.bash_pack import load_bash_pack
from verifirst.benchmarks.nl2sh import json_array_with_lines
from verifirst.core.data import records_of
from verifirst.core.errors import InputError


def _bad_files(tmp: Path, suffix: str) -> dict[str, Path]:
    (tmp / "adir").mkdir()
    loop = tmp / f"loop{suffix}"
    loop.symlink_to(loop)
    latin = tmp / f"latin{suffix}"
    latin.write_bytes(b'{"id": "a"}\n{"id": "caf\xe9"}\n')
    binary = tmp / f"binary{suffix}"
    binary.write_bytes(b"\x00\x01\x02")
    return {"a directory": tmp / "adir", "cannot read": loop, "not UTF-8": latin, "binary": binary}


LOADERS = {
    "bash pack": (load_bash_pack, ".json"),
    "nl2sh json": (json_array_with_lines, ".json"),
    "data jsonl": (lambda p: records_of(p), ".jsonl"),
    "data csv": (lambda p: records_of(p), ".csv"),
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_unreadable_inputs_are_input_errors_naming_the_file(tmp_path, loader):
    load, suffix = LOADERS[loader]
    base = tmp_path / loader.replace(" ", "_")
    base.mkdir()
    for why, path in _bad_files(base, suffix).items():
        if why == "a directory" and loader.startswith("data"):
            continue  # a directory is a task-folder suite for vf data: tested with the iac-tasks suite
        with pytest.raises(InputError) as err:
            load(path)
        text = str(err.value)
        assert path.name in text and (why in text or "is a directory" in text), (loader, why, text)
        if why == "not UTF-8":
            assert ":2" in text or "line 2" in text, text
