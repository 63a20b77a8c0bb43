"""Time-ordered splits and evaluation windows: train oldest, validation next, test newest.

A record's time comes from one field (`time_field`) of the item: its meta, gold or inputs (a
dict item: the key). Accepted values: ISO 8601 strings with or without a timezone (a naive time
is UTC), dates (midnight UTC; also ISO's compact 20240110, as an int or a string), datetimes, and
epoch seconds (an int, a float, or a string of digits, as CSV cells are). A missing or unreadable
time is bad input naming the record.

A group goes where its NEWEST record falls, so a group never straddles a boundary and no record
of a training group is newer than the first validation group's time: `max(train group time) <=
min(val group time) <= min(test group time)`, where a group's time is its newest record's.
Groups with the same time are ordered by group key. Time splits are not stratified by label:
ordering by time is the point.
"""
from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, NamedTuple, Sequence

from verifirst.core.errors import InputError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EXPECTED_TIME = "an ISO 8601 time (2024-05-01T12:00:00Z; naive is UTC), a date, or epoch seconds"
EXPECTED_WINDOWS = "a duration like 7d, 12h, 2w, 30m, 90s, or a count of equal windows like 4"
# The most windows one split or monitor run may cut: each is a table row, a metric step and a list
# the size of its records, and 1s windows over ten years would be 315M of them.
MAX_WINDOWS = 1000


def parse_time(value: Any) -> datetime:
    """One time value as an aware UTC datetime.

    Args:
        value: an ISO 8601 string (naive: UTC), a date (also YYYYMMDD, int or string), a datetime
            (naive: UTC), or epoch seconds (int, float or a string of digits).

    Raises:
        ValueError: the value is none of these (the message says what it was).
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    if isinstance(value, (int, float)):
        return _compact_date(str(value)) or _epoch(float(value), value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+(\.\d+)?", text):
            return _compact_date(text) or _epoch(float(text), value)
        try:
            return parse_time(datetime.fromisoformat(text))
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 time") from None
    raise ValueError(f"a {type(value).__name__} is not a time")


def _compact_date(text: str) -> datetime | None:
    """YYYYMMDD (ISO 8601's basic date, 1900-2999) as a date, else None: as epoch seconds these eight
    digits would fall in 1970-1973, which no record of a monitored run does."""
    if re.fullmatch(r"(19|2\d)\d\d(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])", text):
        try:
            return parse_time(date(int(text[:4]), int(text[4:6]), int(text[6:])))
        except ValueError:  # 20230230
            return None
    return None


def _epoch(seconds: float, raw: Any) -> datetime:
    if not math.isfinite(seconds):
        raise ValueError(f"{raw!r} is not a finite number of epoch seconds")
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"{raw!r} is out of range as epoch seconds") from None


def iso(t: datetime) -> str:
    """A UTC datetime as ISO 8601 with a Z (seconds, or microseconds when it has them)."""
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def raw_time(item: Any, time_field: str) -> Any:
    """The item's value of `time_field` (meta, then gold, then inputs; a dict: the key), or None."""
    if isinstance(item, dict):
        return item.get(time_field)
    for part in ("meta", "gold", "inputs"):
        d = getattr(item, part, None)
        if isinstance(d, dict) and d.get(time_field) not in (None, ""):
            return d[time_field]
    return getattr(item, time_field, None)


def item_times(items: Sequence[Any], time_field: str, key: Callable[[Any], str], *, source: str | None = None,
               lines: dict | None = None) -> dict[str, datetime]:
    """Each item's time by id; a missing or unreadable one is an InputError naming the record.

    Args:
        items: the items.
        time_field: the field holding each record's time.
        key: item -> id.
        source: the file the items came from (named in errors).
        lines: id -> line in `source`, where known.
    """
    out: dict[str, datetime] = {}
    for it in items:
        rid = key(it)
        where = {"path": source, "line": (lines or {}).get(rid), "field": time_field}
        value = raw_time(it, time_field)
        if value in (None, ""):
            raise InputError(f"record {rid!r} has no time field {time_field!r}", **where, expected=EXPECTED_TIME)
        try:
            out[rid] = parse_time(value)
        except ValueError as e:
            raise InputError(f"record {rid!r}: time field {time_field!r}: {e}", **where,
                             expected=EXPECTED_TIME) from None
    return out


def order_groups(by_group: dict[str, list[str]], times: dict[str, datetime]) -> list[tuple[datetime, str]]:
    """(group time, group) oldest first; a group's time is its newest record's (ties: group key)."""
    return sorted((max(times[i] for i in ids), g) for g, ids in by_group.items())


class Window(NamedTuple):
    """One evaluation window: [start, end) (the last window also holds `end`)."""

    label: str
    start: datetime
    end: datetime
    items: list


def parse_windows(spec: Any, field: str = "--windows", *, path: str | None = None, line: int | None = None,
                  error: type = InputError) -> tuple[str, float]:
    """("duration", seconds) for "7d"/"12h"/..., ("count", n) for 4 or "4".

    Args:
        spec: the windows option.
        field: the option's name in errors.
        path: the file the option came from, if any.
        line: its line there, if known.
        error: the InputError class raised (an experiment file's: ConfigError).
    """
    def bad(why: str) -> InputError:
        return error(f"windows {spec!r} {why}", path=path, line=line, field=field, expected=EXPECTED_WINDOWS)

    if isinstance(spec, bool):
        raise bad("is not a duration or a count")
    if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
        n = int(spec)
        if n < 1:
            raise bad("asks for fewer than one window")
        if n > MAX_WINDOWS:
            raise bad(f"asks for more than {MAX_WINDOWS} windows")
        return "count", n
    if isinstance(spec, str):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-zA-Z])", spec.strip())
        if m and m.group(2) == "M":  # a month to some, a minute to others: never guess
            raise bad("is ambiguous: M could mean months or minutes (units are case-insensitive otherwise); "
                      "write 30m for minutes, 30d or 4w for about a month")
        if m and m.group(2).lower() in UNITS and float(m.group(1)) > 0:
            return "duration", float(m.group(1)) * UNITS[m.group(2).lower()]
        if m and m.group(2).lower() in UNITS:
            raise bad("is not a positive duration")
    raise bad("is not a duration or a count")


def _shift(t: datetime, seconds: float) -> datetime:
    """t + seconds, or the last representable time when that passes year 9999 (a window of 3000000d)."""
    try:
        return t + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc)


def _duration(seconds: float) -> str:
    """The smallest whole duration in the largest unit that covers `seconds` (e.g. 3d)."""
    for unit in ("w", "d", "h", "m", "s"):
        if seconds >= UNITS[unit]:
            return f"{math.ceil(seconds / UNITS[unit])}{unit}"
    return "1s"


def time_windows(items: Sequence[Any], time_field: str, spec: Any, *, key: Callable[[Any], str] | None = None,
                 source: str | None = None, field: str = "--windows") -> list[Window]:
    """The items in consecutive time windows, oldest first, empty windows included.

    A duration ("7d") makes windows of that length from the oldest item's time; a count (4) cuts
    the span from the oldest to the newest item into that many equal windows. Labels are ISO 8601
    intervals (`START/END`).

    Args:
        items: the items (Items, dicts or anything with the field; see raw_time).
        time_field: the field holding each record's time.
        spec: "7d", "12h", "2w", "30m", "90s", or a window count (int or digits).
        key: item -> id for error messages (default: the `id` attribute or key).
        source: the file the items came from (named in errors).
        field: the option that gave `spec`, named when the span needs more than MAX_WINDOWS.

    Returns:
        [Window(label, start, end, items)], ordered by start.
    """
    kind, size = parse_windows(spec, field)
    if not items:
        return []
    kf = key or (lambda it: str(it["id"] if isinstance(it, dict) else getattr(it, "id")))
    times = item_times(items, time_field, kf, source=source)
    t0, t1 = min(times.values()), max(times.values())
    span = (t1 - t0).total_seconds()
    if kind == "count":
        n, width = int(size), span / size
    else:
        width = size
        n = int(span // width) + 1
        if n > MAX_WINDOWS:  # refused before a list of n windows is built
            least = _duration(span / (MAX_WINDOWS - 1))
            raise InputError(f"windows {spec!r} cut the records' span ({iso(t0)} to {iso(t1)}) into {n} windows, "
                             f"more than {MAX_WINDOWS}", path=source, field=field,
                             expected=f"a longer duration (at least {least}), a count of windows up to "
                                      f"{MAX_WINDOWS}, or records without far-off times")
    bounds = [_shift(t0, width * k) for k in range(n)] + [t1 if kind == "count" else _shift(t0, width * n)]
    buckets: list[list] = [[] for _ in range(n)]
    for it in items:
        off = (times[kf(it)] - t0).total_seconds()
        k = min(int(off // width), n - 1) if width > 0 else 0
        buckets[k].append(it)
    return [Window(f"{iso(bounds[k])}/{iso(bounds[k + 1])}", bounds[k], bounds[k + 1], buckets[k])
            for k in range(n)]
