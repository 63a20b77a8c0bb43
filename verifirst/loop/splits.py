"""Deterministic group splits and the held-out guard every optimizer goes through.

Assignment hashes (seed, group) with sha256, so it is the same in every process and
on every machine; two items of one group never straddle splits. `by="time"` orders groups by
time instead (train oldest, test newest; see verifirst.loop.timesplit).
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from verifirst.core import atomic
from verifirst.core.errors import InputError, LeakageError

SPLITS = ("train", "val", "test")
# The one default for every entry point (experiment files, vf.optimize, vf.evaluate, calibration):
# validation selects candidates and gates promotion, so it gets a quarter, not a fifth, of the data.
DEFAULT_RATIOS = (0.5, 0.25, 0.25)
DEFAULT_SEED = 0


def _keyfn(key: str | Callable[[Any], Any] | None, field: str = "key") -> Callable[[Any], str]:
    """A function item -> str from an attribute name, a dict key or a callable (None: the item's id).

    Args:
        key: the attribute name or dict key, a callable, or None.
        field: the argument it came from, named when an item lacks the key.
    """
    if key is None:
        return lambda it: str(getattr(it, "id") if hasattr(it, "id") else it["id"])
    if callable(key):
        return lambda it: str(key(it))
    if not isinstance(key, str):
        raise InputError(f"{field} is a {type(key).__name__}", field=field,
                         expected="an attribute or key name, or an item -> label callable")

    def by_name(it: Any) -> str:
        if hasattr(it, key):
            return str(getattr(it, key))
        if isinstance(it, dict) and key in it:
            return str(it[key])
        # an Item keeps its fields under inputs/gold: a bare name would not find them
        raise InputError(f"item {getattr(it, 'id', '')!r} has no attribute or key {key!r}", field=field,
                         expected="an item -> label callable, e.g. lambda it: it.gold['answer']")

    return by_name


def check_seed(seed: Any, field: str = "seed") -> int:
    """The seed as given, refused unless it is an integer (a bool or "42" is not).

    Args:
        seed: the seed given.
        field: the argument's name in the error.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"{seed!r} is not a seed", field=field, expected="an integer")
    return seed


def _rank(seed: int, group: str) -> str:
    return hashlib.sha256(f"{seed}\x00{group}".encode()).hexdigest()


def _allocate(n: int, ratios: Sequence[float]) -> list[int]:
    """Largest-remainder allocation of n slots to ratios (ties go to earlier splits)."""
    raw = [n * r for r in ratios]
    counts = [int(x) for x in raw]
    rest = sorted(range(len(ratios)), key=lambda i: (-(raw[i] - counts[i]), i))
    for i in rest[: n - sum(counts)]:
        counts[i] += 1
    return counts


@dataclass
class SplitManifest:
    train: list[str]
    val: list[str]
    test: list[str]
    seed: int
    ratios: tuple[float, float, float]
    groups: dict[str, str] = field(default_factory=dict)  # id -> group
    seen: set[str] = field(default_factory=set)  # ids admitted to or evaluated by an optimizer
    method: str = "random"  # or "time"
    time_field: str | None = None
    cuts: dict[str, str] = field(default_factory=dict)  # time splits: ISO 8601 boundaries
    times: dict[str, str] = field(default_factory=dict)  # time splits: id -> ISO 8601 time
    windows: Any = None  # time splits: the evaluation windows spec ("7d", 4), if any

    @property
    def digest(self) -> str:
        d = {"train": sorted(self.train), "val": sorted(self.val), "test": sorted(self.test),
             "seed": self.seed, "ratios": [float(r) for r in self.ratios]}
        if self.method != "random":  # random manifests keep the digests they always had
            d.update(method=self.method, time_field=self.time_field)
        body = json.dumps(d, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def split_of(self, item_id: str) -> str | None:
        for name in SPLITS:
            if item_id in self._sets()[name]:
                return name
        return None

    def _sets(self) -> dict[str, set[str]]:
        cache = getattr(self, "_cache", None)
        if cache is None or cache[0] != (len(self.train), len(self.val), len(self.test)):
            cache = ((len(self.train), len(self.val), len(self.test)),
                     {"train": set(self.train), "val": set(self.val), "test": set(self.test)})
            object.__setattr__(self, "_cache", cache)
        return cache[1]

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "val": len(self.val), "test": len(self.test)}

    # -- the guard ---------------------------------------------------------------------
    def admit_to_optimizer(self, ids: Iterable[str], who: str = "optimizer") -> list[str]:
        """Record ids as seen by an optimizer; any test id raises LeakageError."""
        ids = [str(i) for i in ids]
        sets = self._sets()
        leaked = [i for i in ids if i in sets["test"]]
        if leaked:
            raise LeakageError(f"{who} was handed {len(leaked)} held-out test item(s), e.g. "
                               f"{leaked[:3]}; optimizers see train and val only")
        unknown = [i for i in ids if i not in sets["train"] and i not in sets["val"]]
        if unknown:
            raise LeakageError(f"{who} was handed {len(unknown)} item(s) not in split manifest "
                               f"{self.digest}, e.g. {unknown[:3]}; cannot prove they are not held out")
        self.seen.update(ids)
        return ids

    def touch(self, item_id: str, who: str = "metric") -> None:
        """Record that an engine actually evaluated this item; a test or unknown id is leakage.

        The id is recorded before refusing: an engine that swallows the error (DSPy's Evaluate
        counts metric exceptions as failed examples) cannot go on to a clean test score, because
        check_test refuses items recorded here.

        Args:
            item_id: the id of the item the metric was asked to score.
            who: named in the error.
        """
        item_id = str(item_id)
        sets = self._sets()
        self.seen.add(item_id)
        if item_id in sets["test"]:
            raise LeakageError(f"{who} was asked to score held-out test item {item_id!r} during "
                               f"optimization; optimizers see train and val only")
        if item_id not in sets["train"] and item_id not in sets["val"]:
            raise LeakageError(f"{who} was asked to score item {item_id!r}, which is not in split "
                               f"manifest {self.digest}; cannot prove it is not held out")

    def check_test(self, ids: Iterable[str]) -> list[str]:
        """Refuse a test metric over any item that is not test or that an optimizer saw."""
        ids = [str(i) for i in ids]
        sets = self._sets()
        touched = [i for i in ids if i in self.seen]
        if touched:
            raise LeakageError(f"test metric refused: {len(touched)} item(s) were seen or evaluated "
                               f"by an optimizer, e.g. {touched[:3]}")
        not_test = [i for i in ids if i not in sets["test"]]
        if not_test:
            raise LeakageError(f"test metric refused: {len(not_test)} item(s) are not in the "
                               f"test split, e.g. {not_test[:3]}")
        return ids

    def select(self, items: Sequence[Any], split: str, key=None) -> list[Any]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
        kf = _keyfn(key)
        wanted = self._sets()[split]
        return [it for it in items if kf(it) in wanted]

    # -- persistence -------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {"digest": self.digest, "method": self.method, "seed": self.seed, "ratios": list(self.ratios),
             "train": self.train, "val": self.val, "test": self.test,
             "groups": self.groups, "seen": sorted(self.seen)}
        if self.method == "time":
            d.update(time_field=self.time_field, cuts=self.cuts, windows=self.windows,
                     test_windows=self.time_report().get("test_window", {}), times=self.times)
        return d

    def time_report(self) -> dict:
        """A time split's cut times and, with windows, each window's counts per split and the
        window each test item fell in ({} for a random split)."""
        if self.method != "time":
            return {}
        out: dict[str, Any] = {"method": "time", "time_field": self.time_field, "cuts": dict(self.cuts)}
        if self.windows is not None:
            from verifirst.loop.timesplit import time_windows

            rows = [{"id": i, "t": t} for i, t in self.times.items()]
            sets = self._sets()
            out["windows_spec"] = self.windows
            out["windows"], out["test_window"] = [], {}
            for w in time_windows(rows, "t", self.windows):
                counts = {s: sum(r["id"] in sets[s] for r in w.items) for s in SPLITS}
                out["windows"].append({"label": w.label, "start": w.start.isoformat().replace("+00:00", "Z"),
                                       "end": w.end.isoformat().replace("+00:00", "Z"), "n": len(w.items),
                                       **{f"n_{s}": c for s, c in counts.items()}})
                out["test_window"].update({r["id"]: w.label for r in w.items if r["id"] in sets["test"]})
        return out

    def save(self, path: str | Path) -> Path:
        return atomic.write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "SplitManifest":
        from verifirst.core.textfile import read_text

        path = Path(path)
        try:
            d = json.loads(read_text(path, "split manifest"))  # missing, a directory, binary: InputError
        except json.JSONDecodeError as e:
            raise InputError(f"not valid JSON: {e.msg}", path=str(path), line=e.lineno) from None
        if not isinstance(d, dict):
            raise InputError(f"holds a JSON {type(d).__name__}, not an object", path=str(path),
                             expected="a manifest written by SplitManifest.save")
        for k in ("train", "val", "test", "seed", "ratios"):
            if k not in d:
                raise InputError("missing key", path=str(path), field=k,
                                 expected="a manifest written by SplitManifest.save")
        m = cls(list(d["train"]), list(d["val"]), list(d["test"]), int(d["seed"]),
                tuple(float(r) for r in d["ratios"]), dict(d.get("groups", {})), set(d.get("seen", [])),
                str(d.get("method") or "random"), d.get("time_field"), dict(d.get("cuts") or {}),
                dict(d.get("times") or {}), d.get("windows"))
        if "digest" in d and d["digest"] != m.digest:
            raise InputError(f"digest mismatch: file says {d['digest']}, contents hash to {m.digest}",
                             path=str(path), field="digest", expected="an unedited manifest")
        return m


NAMES = {"train": "training", "val": "validation", "test": "test"}
# The splits each named optimizer needs items in; an engine may say so itself (`needs_splits`).
# GEPA on an empty validation split (asked for with no_val) selects on train, as dspy.GEPA does.
OPTIMIZER_NEEDS = {"gepa": ("train",), "simba": ("train",), "autorefine": ("train", "val")}


def check_ratios(ratios: Any, *, no_val: bool = False, no_test: bool = False, source: str | None = None,
                 line: int | None = None, field: str = "splits", flags: tuple[str | None, str | None] = ("no_val", "no_test")
                 ) -> tuple[float, float, float]:
    """Three fractions in [0, 1] summing to 1; an empty validation or test split only when asked for.

    Args:
        ratios: (train, val, test) fractions.
        no_val: the caller asked to run without a validation split (val ratio 0).
        no_test: the caller asked to run without a held-out test split (test ratio 0).
        source: the file the ratios came from, if any.
        line: their line there, if known.
        field: the option's name in messages (`splits.ratios`, `--splits`).
        flags: how the caller spells no_val and no_test (`--no-val`, `no_test = true`); None where
            the caller cannot run without that split.

    Returns:
        The ratios as floats.
    """
    def bad(msg: str, expected: str = "three fractions summing to 1, e.g. [0.5, 0.25, 0.25]") -> InputError:
        from verifirst.core.errors import ConfigError

        return ConfigError(msg, path=source, line=line, field=field, expected=expected)

    if isinstance(ratios, (str, bytes, dict)) or not hasattr(ratios, "__len__") or len(ratios) != 3:
        raise bad(f"ratios {ratios!r} are not three numbers")
    if any(isinstance(r, bool) or not isinstance(r, (int, float)) for r in ratios):
        raise bad(f"ratios {list(ratios)!r} are not all numbers")
    out = tuple(float(r) for r in ratios)
    if not all(0.0 <= r <= 1.0 for r in out):  # NaN fails too
        raise bad(f"ratios {list(out)} are not fractions from 0 to 1")
    if abs(sum(out) - 1.0) > 1e-6:
        raise bad(f"ratios {list(out)} are not three numbers summing to 1")
    if out[0] == 0:
        raise bad(f"ratios {list(out)} leave the training split empty", "a positive train fraction")
    for name, ratio, asked, flag in (("val", out[1], no_val, flags[0]), ("test", out[2], no_test, flags[1])):
        if ratio == 0 and not asked:
            raise bad(f"ratios {list(out)} leave the {NAMES[name]} split empty",
                      f"a positive {name} fraction" + (f", or {flag} to run without one on purpose" if flag else ""))
        if ratio > 0 and asked:
            raise bad(f"{flag} is set but ratios {list(out)} give the {NAMES[name]} split {ratio}",
                      f"a {name} fraction of 0 with {flag}")
    return out  # type: ignore[return-value]


def nonempty_splits(manifest: "SplitManifest") -> tuple[str, ...]:
    """The splits that hold items, in order (what a run evaluates)."""
    return tuple(s for s, n in manifest.sizes().items() if n)


def check_optimizer_needs(manifest: "SplitManifest", engine: Any, source: str | None = None) -> None:
    """Refuse, before the optimizer starts, splits it cannot work with (GEPA on an empty training
    or validation split).

    Args:
        manifest: the run's splits.
        engine: the resolved engine (None: evaluation only, which needs nothing).
        source: the file the configuration came from, if any.
    """
    if engine is None:
        return
    name = getattr(engine, "name", type(engine).__name__)
    needs = getattr(engine, "needs_splits", None) or OPTIMIZER_NEEDS.get(name, ("train",))
    sizes = manifest.sizes()
    empty = [s for s in needs if not sizes.get(s)]
    if empty:
        from verifirst.core.errors import ConfigError

        have = ", ".join(f"{s} {n}" for s, n in sizes.items())
        raise ConfigError(f"optimizer {name!r} needs items in the {' and '.join(NAMES[s] for s in needs)} "
                          f"split(s); the {' and '.join(NAMES[s] for s in empty)} split is empty ({have})",
                          path=source, field="splits",
                          expected=f"ratios that give {' and '.join(needs)} items, or optimizer none")


def make_splits(items: Sequence[Any], key: str | Callable | None = None,
                ratios: Sequence[float] = (0.5, 0.25, 0.25), seed: int = 0,
                stratify: str | Callable | None = None, group: str | Callable | None = None,
                source: str | None = None, *, by: str = "random", time_field: str | None = None,
                windows: Any = None, lines: dict | None = None) -> SplitManifest:
    """Split items into train/val/test by group, deterministically (and stratified on request).

    Args:
        items: the items.
        key: item id (attribute name, dict key or callable; default `id`).
        ratios: (train, val, test) fractions of the groups.
        seed: the seed of a random split.
        stratify: label per item; groups take their first item's label (random splits only).
        group: group key; defaults to the id (use the task id so candidates of one task stay together).
        source: the file the items came from (named in errors).
        by: "random" (seeded hash order) or "time" (oldest groups train, newest test; a group goes
            where its newest record falls; see verifirst.loop.timesplit).
        time_field: the field holding each record's time (by="time").
        windows: evaluation windows for a time split ("7d", 4), recorded in the manifest.
        lines: id -> line in `source`, for errors about a record's time.
    """
    check_split_method(by, time_field, windows, source=source)
    check_seed(seed)
    ratios = tuple(float(r) for r in ratios)
    if len(ratios) != 3 or any(r < 0 for r in ratios) or abs(sum(ratios) - 1.0) > 1e-6:
        raise InputError(f"ratios must be three non-negative numbers summing to 1, got {ratios}",
                         path=source, field="splits.ratios", expected="e.g. 0.5,0.25,0.25")
    kf = _keyfn(key)
    gf = _keyfn(group, "group") if group is not None else kf
    sf = _keyfn(stratify, "stratify") if stratify is not None else (lambda it: "")
    ids_seen: set[str] = set()
    by_group: dict[str, list[str]] = defaultdict(list)
    stratum: dict[str, str] = {}
    for it in items:
        i = kf(it)
        if i in ids_seen:
            raise InputError(f"duplicate item id {i!r}", path=source, field="id",
                             expected="unique ids")
        ids_seen.add(i)
        g = gf(it)
        by_group[g].append(i)
        stratum.setdefault(g, sf(it))
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    time_parts: dict[str, Any] = {}
    if by == "time":
        time_parts = _time_order(items, kf, by_group, ratios, out, time_field, source, lines)  # type: ignore[arg-type]
    else:
        strata: dict[str, list[str]] = defaultdict(list)
        for g in by_group:
            strata[stratum[g]].append(g)
        for s in sorted(strata):
            groups = sorted(strata[s], key=lambda g: _rank(seed, g))
            counts = _allocate(len(groups), ratios)
            start = 0
            for name, c in zip(SPLITS, counts):
                for g in groups[start:start + c]:
                    out[name].extend(by_group[g])
                start += c
    for name, r in zip(SPLITS, ratios):
        if r > 0 and not out[name]:
            raise InputError(f"split {name!r} is empty: {len(by_group)} group(s) are too few for "
                             f"ratios {ratios}", path=source, field="splits",
                             expected="more items, or ratios that give every split a group")
    groups_map = {i: g for g, ids in by_group.items() for i in ids}
    return SplitManifest(out["train"], out["val"], out["test"], int(seed), ratios, groups_map, method=by,
                         windows=windows if by == "time" else None, **time_parts)


SPLIT_METHODS = ("random", "time")


def check_split_method(by: Any, time_field: Any, windows: Any = None, *, source: str | None = None,
                       line: int | None = None, prefix: str = "splits.", error: type = InputError) -> None:
    """Refuse an unknown split method, a time split without its field, or windows without one.

    Args:
        by: "random" or "time".
        time_field: the record field holding the time (required by "time").
        windows: the evaluation windows spec, or None.
        source: the file the options came from, if any.
        line: their line there, if known.
        prefix: how the options are spelled in messages ("splits." in TOML and the API, "--" in the CLI).
        error: the InputError class raised (an experiment file's: ConfigError).
    """
    def name(k: str) -> str:
        return prefix + (k.replace("_", "-") if prefix == "--" else k)

    if by not in SPLIT_METHODS:
        raise error(f"unknown split method {by!r}", path=source, line=line,
                    field=name("split_by" if prefix == "--" else "by"), expected=" or ".join(SPLIT_METHODS))
    if by == "time" and (not isinstance(time_field, str) or not time_field.strip()):
        raise error("a time split needs the field that holds each record's time", path=source, line=line,
                    field=name("time_field"), expected="a field name, e.g. created_at")
    if windows is not None:
        if by != "time":
            with_time = "--split-by time" if prefix == "--" else "by = time"
            raise error("windows are periods of a time split", path=source, line=line, field=name("windows"),
                        expected=f"{with_time} with windows, or no windows")
        from verifirst.loop.timesplit import parse_windows

        parse_windows(windows, field=name("windows"), path=source, line=line, error=error)


def split_options(splits: Any) -> tuple[Any, dict]:
    """(ratios, {"by", "time_field", "windows"}) from the API's `splits`: ratios, or a dict
    {"ratios": ..., "by": "time", "time_field": "created_at", "windows": "7d"}.

    Args:
        splits: (train, val, test) ratios, a "0.5,0.25,0.25" string, or the dict form.
    """
    if not isinstance(splits, dict):
        return splits, {"by": "random", "time_field": None, "windows": None}
    unknown = sorted(set(splits) - {"ratios", "by", "time_field", "windows"})
    if unknown:
        raise InputError(f"unknown key(s) {unknown} in splits", field="splits",
                         expected="ratios, by, time_field, windows")
    opts = {"by": splits.get("by") or "random", "time_field": splits.get("time_field"),
            "windows": splits.get("windows")}
    check_split_method(**opts)
    return splits.get("ratios", (0.5, 0.25, 0.25)), opts


def check_resumed_manifest(run_dir: str | Path, manifest: SplitManifest) -> None:
    """A run directory resumes only on the splits it started with (method and items).

    Args:
        run_dir: the run directory (its split_manifest.json, if any, was written by the earlier run).
        manifest: this invocation's splits.
    """
    path = Path(run_dir) / "split_manifest.json"
    if not path.exists():
        return
    old = SplitManifest.load(path)
    if old.method != manifest.method:
        raise InputError(f"this run directory was split {old.method!r}, this run splits {manifest.method!r}",
                         path=str(path), field="method", expected="the same split options to resume, or a new run dir")
    if old.digest != manifest.digest:
        raise InputError(f"this run directory holds splits {old.digest}, this run makes {manifest.digest}",
                         path=str(path), field="digest", expected="the same data and split options to resume, "
                                                                   "or a new run dir")


def _time_order(items: Sequence[Any], kf: Callable, by_group: dict[str, list[str]], ratios: tuple,
                out: dict[str, list[str]], time_field: str, source: str | None, lines: dict | None) -> dict:
    """Fill `out` with groups oldest first (train, val, test); the manifest's time fields."""
    from verifirst.loop.timesplit import item_times, iso, order_groups

    times = item_times(items, time_field, kf, source=source, lines=lines)
    ordered = order_groups(by_group, times)
    counts = _allocate(len(ordered), ratios)
    start, cuts = 0, {}
    for name, c in zip(SPLITS, counts):
        part = ordered[start:start + c]
        for _, g in part:
            out[name].extend(by_group[g])
        if part:  # the split's oldest record and its newest group's time
            cuts[f"{name}_start"] = iso(min(times[i] for _, g in part for i in by_group[g]))
            cuts[f"{name}_end"] = iso(part[-1][0])
        start += c
    return {"time_field": time_field, "cuts": cuts, "times": {i: iso(t) for i, t in times.items()}}
