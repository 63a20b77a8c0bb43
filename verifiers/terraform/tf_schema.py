"""Load a `terraform providers schema -json` file (.json or .json.gz) into a ProviderSchema.

Several providers may be present; resource and data source types are looked up across all of
them. Parsed schemas are cached per (path, mtime, size) since the AWS one takes ~0.1-0.3 s to parse.
The package ships the AWS provider schemas under data/aws/ (MIT, see data/aws/NOTICE); a
configuration's `required_providers` version constraint picks among them.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from verifirst.core.errors import InputError

EXPECTED_SHAPE = ('{"format_version": ..., "provider_schemas": {"<address>": {"provider": {...}, '
                  '"resource_schemas": {...}, "data_source_schemas": {...}}}}')

_CACHE: dict[tuple, "ProviderSchema"] = {}
_LOCK = threading.Lock()


@dataclass
class ProviderSchema:
    """Lookups over one schema file. `resource(t)` and `data_source(t)` give the block schema
    (the dict with `attributes` / `block_types`) or None for an unknown type."""

    raw: dict
    path: str = ""
    _resources: dict = field(default_factory=dict, repr=False)
    _data_sources: dict = field(default_factory=dict, repr=False)
    _owner: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        for address, prov in self.raw.get("provider_schemas", {}).items():
            for t, entry in (prov.get("resource_schemas") or {}).items():
                self._resources.setdefault(t, entry)
                self._owner.setdefault(("managed", t), address)
            for t, entry in (prov.get("data_source_schemas") or {}).items():
                self._data_sources.setdefault(t, entry)
                self._owner.setdefault(("data", t), address)

    # -- lookups -----------------------------------------------------------------------------
    def resource(self, type_name: str) -> dict | None:
        entry = self._resources.get(type_name)
        return entry["block"] if entry else None

    def data_source(self, type_name: str) -> dict | None:
        entry = self._data_sources.get(type_name)
        return entry["block"] if entry else None

    def block(self, mode: str, type_name: str) -> dict | None:
        """mode is "managed" or "data" as in plan JSON."""
        return self.resource(type_name) if mode == "managed" else self.data_source(type_name)

    def schema_version(self, mode: str, type_name: str) -> int:
        table = self._resources if mode == "managed" else self._data_sources
        entry = table.get(type_name) or {}
        return int(entry.get("version", 0) or 0)

    def provider_address(self, mode: str = "managed", type_name: str | None = None) -> str:
        """Full provider address (registry.terraform.io/hashicorp/aws) owning a type, or the
        address whose local name matches the type prefix, or the first provider."""
        if type_name is not None and (mode, type_name) in self._owner:
            return self._owner[(mode, type_name)]
        addresses = list(self.raw.get("provider_schemas", {}))
        if type_name:
            prefix = type_name.split("_", 1)[0]
            for a in addresses:
                if a.rsplit("/", 1)[-1] == prefix:
                    return a
        return addresses[0] if addresses else "registry.terraform.io/hashicorp/" + (
            (type_name or "aws").split("_", 1)[0])

    def provider_config(self, local_name: str | None = None) -> dict | None:
        """Block schema of a provider's own configuration (the `provider "aws" {}` block)."""
        for address, prov in self.raw.get("provider_schemas", {}).items():
            if local_name is None or address.rsplit("/", 1)[-1] == local_name:
                return (prov.get("provider") or {}).get("block", {"attributes": {}})
        return None

    def provider_names(self) -> list[str]:
        return [a.rsplit("/", 1)[-1] for a in self.raw.get("provider_schemas", {})]

    def resource_types(self) -> list[str]:
        return sorted(self._resources)

    def data_source_types(self) -> list[str]:
        return sorted(self._data_sources)


def _validate(raw, path: str) -> None:
    if not isinstance(raw, dict):
        raise InputError("schema file is not a JSON object", path=path, expected=EXPECTED_SHAPE)
    if "provider_schemas" not in raw or not isinstance(raw["provider_schemas"], dict):
        raise InputError("missing key 'provider_schemas'", path=path, field="provider_schemas",
                         expected=EXPECTED_SHAPE)
    for address, prov in raw["provider_schemas"].items():
        where = f"provider_schemas.{address}"
        if not isinstance(prov, dict):
            raise InputError("provider entry is not an object", path=path, field=where,
                             expected=EXPECTED_SHAPE)
        if "resource_schemas" not in prov and "data_source_schemas" not in prov:
            raise InputError("missing key 'resource_schemas'", path=path,
                             field=f"{where}.resource_schemas", expected=EXPECTED_SHAPE)
        for table in ("resource_schemas", "data_source_schemas"):
            entries = prov.get(table) or {}
            if not isinstance(entries, dict):
                raise InputError(f"'{table}' is not an object", path=path,
                                 field=f"{where}.{table}", expected=EXPECTED_SHAPE)
            for t, entry in entries.items():
                if not isinstance(entry, dict) or not isinstance(entry.get("block"), dict):
                    raise InputError("missing key 'block'", path=path,
                                     field=f"{where}.{table}.{t}.block",
                                     expected='{"version": N, "block": {"attributes": {...}}}')


def from_dict(raw: dict, path: str = "<dict>") -> ProviderSchema:
    _validate(raw, path)
    return ProviderSchema(raw=raw, path=path)


def load_schema(path) -> ProviderSchema:
    """Parse (or return the cached parse of) a provider schema file; a list or tuple of files is
    one schema holding all their providers (the first file's wins a provider in two)."""
    if isinstance(path, ProviderSchema):
        return path
    if isinstance(path, (list, tuple)):
        return _merged(tuple(str(x) for x in path))
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise InputError(f"cannot read schema file: {exc.strerror}", path=str(p),
                         expected="a `terraform providers schema -json` file (.json or .json.gz)")
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    try:
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rt", encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read schema file: {exc}", path=str(p),
                         expected="a `terraform providers schema -json` file (.json or .json.gz)")
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=str(p), line=exc.lineno,
                         expected=EXPECTED_SHAPE)
    schema = from_dict(raw, str(p))
    with _LOCK:
        _CACHE[key] = schema
    return schema


def _merged(paths: tuple) -> ProviderSchema:
    if len(paths) == 1:
        return load_schema(paths[0])
    parts = [load_schema(x) for x in paths]
    key = ("merged",) + paths
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    raw = {"format_version": "1.0", "provider_schemas": {}}
    for part in parts:
        for address, prov in part.raw.get("provider_schemas", {}).items():
            raw["provider_schemas"].setdefault(address, prov)
    schema = ProviderSchema(raw=raw, path=" + ".join(paths))
    with _LOCK:
        _CACHE[key] = schema
    return schema


_MERGED_DIR: list = []  # this process's private directory of merged schema files


def merged_file(paths) -> str:
    """One schema file holding every provider of several (for the terraform backend's schema
    provider, which serves each provider of one file); written once per set, in a private
    directory of this process.

    Args:
        paths: schema files; a single one is returned as it is.
    """
    paths = tuple(str(x) for x in paths)
    if len(paths) == 1:
        return paths[0]
    import hashlib
    import shutil
    import tempfile

    with _LOCK:
        if not _MERGED_DIR:
            _MERGED_DIR.append(tempfile.mkdtemp(prefix="vf-schemas-"))
            import atexit
            atexit.register(shutil.rmtree, _MERGED_DIR[0], True)
    out = Path(_MERGED_DIR[0]) / (hashlib.sha256("\0".join(paths).encode()).hexdigest()[:16] + ".json")
    if not out.is_file():
        tmp = out.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(_merged(paths).raw), encoding="utf-8")
        os.replace(tmp, out)
    return str(out)


def schema_label(schema) -> str:
    """File name(s) of a schema option (a path, or several) for labels and reports."""
    if isinstance(schema, (list, tuple)):
        return " + ".join(Path(x).name for x in schema)
    return Path(str(schema)).name


SHIPPED_DIR = Path(__file__).resolve().parent / "data"
_SHIPPED_RE = re.compile(r"^(?P<provider>[a-z0-9]+)_provider_schema_(?P<version>\d+(?:\.\d+)*)\.slim\.json\.gz$")
_CONSTRAINT_RE = re.compile(r"^\s*(~>|>=|<=|!=|=|>|<)?\s*v?(\d+(?:\.\d+)*)\s*$")


@dataclass(frozen=True)
class ShippedSchema:
    """One provider schema file that ships in the package (data/<provider>/)."""

    provider: str
    version: str
    path: Path

    @property
    def key(self) -> tuple:
        return _version_tuple(self.version)


def _version_tuple(v: str) -> tuple:
    return tuple(int(x) for x in v.split("."))


def shipped_schemas(provider: str | None = None) -> list[ShippedSchema]:
    """The schema files under data/<provider>/, newest version first per provider.

    Args:
        provider: keep only this provider's local name (e.g. "aws"); None keeps all.
    """
    found = []
    for f in sorted(SHIPPED_DIR.glob("*/*.slim.json.gz")):
        m = _SHIPPED_RE.match(f.name)
        if m and (provider is None or m["provider"] == provider):
            found.append(ShippedSchema(m["provider"], m["version"], f))
    return sorted(found, key=lambda s: (s.provider, tuple(-x for x in s.key)))


def version_satisfies(version: str, constraint: str) -> bool:
    """Whether a provider version meets a Terraform version constraint ("~> 5.0", ">= 4, < 6").

    Args:
        version: a released version such as "5.100.0".
        constraint: comma-separated terms with =, !=, >, >=, <, <= or ~> (pessimistic).

    Raises:
        ValueError: a term that is not a version constraint.
    """
    have = _version_tuple(version)
    for term in (t for t in constraint.split(",") if t.strip()):
        m = _CONSTRAINT_RE.match(term)
        if not m:
            raise ValueError(f"not a version constraint: {term.strip()!r}")
        op, want = m[1] or "=", _version_tuple(m[2])
        width = max(len(have), len(want))
        h, w = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        if op == "~>":
            # ~> 5.0 allows 5.x; ~> 5.1.2 allows 5.1.x: all but the last given part are fixed
            fixed = len(want) - 1 if len(want) > 1 else 1
            ok = h >= w and have[:fixed] == want[:fixed]
        else:
            ok = {"=": h == w, "!=": h != w, ">": h > w, ">=": h >= w, "<": h < w, "<=": h <= w}[op]
        if not ok:
            return False
    return True


_REQUIRED_RE = re.compile(r"required_providers\s*\{", re.S)


def provider_constraint(files: dict, provider: str = "aws") -> str | None:
    """The version constraint a configuration's `required_providers` gives a provider, or None.

    Args:
        files: {file name: HCL text} of the configuration.
        provider: the provider's local name in `required_providers`.
    """
    entry = re.compile(provider + r'\s*=\s*\{([^{}]*)\}', re.S)
    for text in files.values():
        if not isinstance(text, str):
            continue
        for m in _REQUIRED_RE.finditer(text):
            block = _balanced(text, m.end() - 1)
            e = entry.search(block)
            if e:
                v = re.search(r'version\s*=\s*"([^"]*)"', e.group(1))
                if v:
                    return v.group(1)
    return None


def _balanced(text: str, start: int) -> str:
    """The text of the brace block opening at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i + 1]
    return text[start:]


_VALID_TERM_RE = re.compile(r"^\s*(~>|>=|<=|!=|=|>|<)?\s*v?\d+(\.\d+){0,2}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\s*$")


def constraint_is_valid(constraint: str) -> bool:
    """Whether a version constraint has terraform's syntax (comma-separated terms)."""
    terms = constraint.split(",")
    return bool(constraint.strip()) and all(_VALID_TERM_RE.match(t) for t in terms)


def unmet_constraints(files: dict) -> list[str]:
    """A reason per shipped provider a configuration uses whose `required_providers` version
    constraint no shipped schema meets (`aws >= 99.0`): checking it against another version's
    schema would be no observation of it.

    Args:
        files: {file name: HCL text}.
    """
    out = []
    for ptype, constraint in providers_used(files).items():
        ships = shipped_schemas(ptype)
        if not ships or not constraint or not constraint_is_valid(constraint):
            continue
        try:
            if any(version_satisfies(s.version, constraint) for s in ships):
                continue
        except ValueError:
            continue  # a pre-release term: left to terraform
        have = ", ".join(s.version for s in ships)
        out.append(f'required_providers asks for {ptype} "{constraint}"; the verifier has the {ptype} schema of '
                   f"{have} only, so the configuration was not checked against the version it asks for. Fix: a "
                   f"constraint that {have} meets, or --schema with that version's `terraform providers schema -json`.")
    return out


def choose_shipped(constraint: str | None = None, provider: str = "aws") -> ShippedSchema | None:
    """The newest shipped schema of a provider that satisfies a constraint (the newest when the
    constraint is None, unparseable or met by none: terraform reports that itself)."""
    ships = shipped_schemas(provider)
    if not ships:
        return None
    if constraint:
        try:
            for s in ships:
                if version_satisfies(s.version, constraint):
                    return s
        except ValueError:
            pass
    return ships[0]


def schema_for_config(files: dict, provider: str = "aws") -> str | None:
    """Path of the shipped schema a configuration asks for through `required_providers`."""
    chosen = choose_shipped(provider_constraint(files, provider), provider)
    return str(chosen.path) if chosen else None


_TYPE_RE = re.compile(r'^\s*(?:resource|data|ephemeral)\s+"([A-Za-z0-9-]+)_', re.M)
_PROVIDER_BLOCK_RE = re.compile(r'^\s*provider\s+"([^"]+)"', re.M)
_PROVIDER_ARG_RE = re.compile(r'^\s*provider\s*=\s*([A-Za-z0-9_-]+)', re.M)
_ENTRY_RE = re.compile(r'([A-Za-z0-9_-]+)\s*=\s*\{([^{}]*)\}', re.S)


def required_providers(files: dict) -> dict[str, dict]:
    """{local name: {"source": ..., "version": ...}} from a configuration's `required_providers`.

    Args:
        files: {file name: HCL text}.
    """
    out: dict[str, dict] = {}
    for text in files.values():
        if not isinstance(text, str):
            continue
        for m in _REQUIRED_RE.finditer(text):
            block = _balanced(text, m.end() - 1)
            for e in _ENTRY_RE.finditer(block[1:]):
                entry = out.setdefault(e.group(1), {})
                for key in ("source", "version"):
                    v = re.search(key + r'\s*=\s*"([^"]*)"', e.group(2))
                    if v:
                        entry.setdefault(key, v.group(1))
    return out


def provider_type(local: str, required: dict) -> str:
    """The provider type (google) of a local name, through required_providers' source
    ("hashicorp/google"); a local name without a source is its own type."""
    source = (required.get(local) or {}).get("source", "")
    return source.rstrip("/").rsplit("/", 1)[-1].lower() if source else local


def providers_used(files: dict) -> dict[str, str | None]:
    """{provider type: version constraint or None} for every provider a configuration uses:
    resource and data type prefixes, provider blocks, `provider =` arguments, required_providers.

    Args:
        files: {file name: HCL text}.
    """
    required = required_providers(files)
    locals_ = set(required)
    for name, text in files.items():
        if isinstance(text, str) and name.endswith(".tf.json"):
            _json_providers(text, required, locals_)
        elif isinstance(text, str):
            for rx in (_TYPE_RE, _PROVIDER_BLOCK_RE, _PROVIDER_ARG_RE):
                locals_.update(rx.findall(text))
    out: dict[str, str | None] = {}
    for local in sorted(locals_):
        ptype = provider_type(local, required)
        out.setdefault(ptype, (required.get(local) or {}).get("version"))
    return out


def _json_providers(text: str, required: dict, locals_: set) -> None:
    """providers_used() for a `.tf.json` file: type prefixes, provider keys, required_providers."""
    try:
        doc = json.loads(text.lstrip("\ufeff"))
    except ValueError:
        return
    if not isinstance(doc, dict):
        return
    for kind in ("resource", "data"):
        for obj in doc.get(kind) if isinstance(doc.get(kind), list) else [doc.get(kind)]:
            if isinstance(obj, dict):
                locals_.update(t.split("_", 1)[0] for t in obj)
    if isinstance(doc.get("provider"), dict):
        locals_.update(doc["provider"])
    for tf in doc.get("terraform") if isinstance(doc.get("terraform"), list) else [doc.get("terraform")]:
        rp = tf.get("required_providers") if isinstance(tf, dict) else None
        for entries in rp if isinstance(rp, list) else [rp]:
            for local, e in (entries or {}).items() if isinstance(entries, dict) else ():
                locals_.add(local)
                if isinstance(e, dict):
                    required.setdefault(local, {k: v for k, v in e.items() if k in ("source", "version")})


def schemas_for_config(files: dict) -> list[str]:
    """The shipped schema files of every shipped provider a configuration uses, each the newest
    version its `required_providers` constraint allows; the newest AWS one when it uses none."""
    shipped = {s.provider for s in shipped_schemas()}
    out = []
    for ptype, constraint in providers_used(files).items():
        if ptype in shipped:
            chosen = choose_shipped(constraint, ptype)
            if chosen:
                out.append(str(chosen.path))
    if not out:
        default = choose_shipped()
        return [str(default.path)] if default else []
    return out


def default_schema_path() -> str | None:
    """VERIFIRST_TF_SCHEMA when set, else the newest shipped AWS schema."""
    env = os.environ.get("VERIFIRST_TF_SCHEMA")
    if env:
        return env
    chosen = choose_shipped()
    return str(chosen.path) if chosen else None


def shipped_table() -> list[dict]:
    """One row per shipped schema: provider, version, resource and data source counts, licence
    (read from the NOTICE next to the files), source and path."""
    rows = []
    for s in shipped_schemas():
        schema = load_schema(s.path)
        notice = s.path.parent / "NOTICE"
        text = notice.read_text(encoding="utf-8") if notice.is_file() else ""
        source = re.search(r"https://github\.com/\S+", text)
        rows.append({"provider": s.provider, "version": s.version,
                     "resources": len(schema.resource_types()), "data_sources": len(schema.data_source_types()),
                     "licence": "MIT" if "MIT License" in text else "see NOTICE",
                     "source": source.group(0) if source else "", "path": str(s.path)})
    return rows
