"""A schema-only Terraform provider: serves a `terraform providers schema -json` file over the
plugin protocol (v6, via the `tf` package's generated gRPC code) and plans computed attributes
as unknown. Real terraform then runs validate/plan/show offline against the real schema.

Two ways to run it:
- managed: terraform starts it itself (dev_overrides launcher), TLS handshake on stdout;
- reattach: one long-lived process serves many terraform runs (TF_REATTACH_PROVIDERS), which
  saves the ~6 provider starts a single plan+show otherwise costs.
"""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

from verifirst.core.errors import InputError

DEFAULT_AWS = "registry.terraform.io/hashicorp/aws"
_UNKNOWN_BYTES = b"\x00"


# ---------------------------------------------------------------- schema file -> dict
def load_schema_dict(path: str | os.PathLike | dict) -> dict:
    """The raw `providers schema -json` dict from .json / .json.gz (or a dict already)."""
    if isinstance(path, dict):
        raw = path
        where = "<dict>"
    else:
        where = str(path)
        p = Path(path)
        if not p.is_file():
            raise InputError("schema file not found", path=where,
                             expected="a `terraform providers schema -json` file (.json or .json.gz)")
        data = p.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        try:
            raw = json.loads(data)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg}", path=where, line=exc.lineno,
                             expected="`terraform providers schema -json` output") from None
    schemas = raw.get("provider_schemas") if isinstance(raw, dict) else None
    if not isinstance(schemas, dict) or not schemas:
        raise InputError("no provider_schemas object", path=where, field="provider_schemas",
                         expected="`terraform providers schema -json` output")
    return raw


def provider_names(raw: dict) -> list[str]:
    return sorted(raw["provider_schemas"])


def short_name(address: str) -> str:
    """registry.terraform.io/hashicorp/aws -> aws (the executable is terraform-provider-aws)."""
    return address.rstrip("/").rsplit("/", 1)[-1]


# ---------------------------------------------------------------- JSON schema -> protobuf
def _pb():
    from tf.gen import tfplugin_pb2 as pb
    return pb


def _attr_pb(pb, name: str, a: dict):
    kw: dict[str, Any] = dict(name=name, required=bool(a.get("required")),
                              optional=bool(a.get("optional")), computed=bool(a.get("computed")),
                              sensitive=bool(a.get("sensitive")), deprecated=bool(a.get("deprecated")))
    if "nested_type" in a:
        nt = a["nested_type"]
        kw["nested_type"] = pb.Schema.Object(
            attributes=[_attr_pb(pb, n, x) for n, x in sorted(nt.get("attributes", {}).items())],
            nesting=getattr(pb.Schema.Object.NestingMode, nt.get("nesting_mode", "single").upper()),
            min_items=int(nt.get("min_items", 0)), max_items=int(nt.get("max_items", 0)))
    else:
        kw["type"] = json.dumps(a.get("type", "dynamic"), separators=(",", ":")).encode()
    return pb.Schema.Attribute(**kw)


def _block_pb(pb, b: dict):
    nested = []
    for n, bt in sorted(b.get("block_types", {}).items()):
        nested.append(pb.Schema.NestedBlock(
            type_name=n, block=_block_pb(pb, bt.get("block", {})),
            nesting=getattr(pb.Schema.NestedBlock.NestingMode, bt.get("nesting_mode", "list").upper()),
            min_items=int(bt.get("min_items", 0)), max_items=int(bt.get("max_items", 0))))
    return pb.Schema.Block(
        attributes=[_attr_pb(pb, n, a) for n, a in sorted(b.get("attributes", {}).items())],
        block_types=nested, deprecated=bool(b.get("deprecated")))


def _schema_pb(pb, s: dict | None):
    s = s or {"block": {}}
    return pb.Schema(version=int(s.get("version", 0)), block=_block_pb(pb, s.get("block", {})))


# ---------------------------------------------------------------- msgpack values
def _unpack(dv) -> Any:
    import msgpack
    if dv.msgpack:
        return msgpack.unpackb(dv.msgpack, raw=False, strict_map_key=False,
                               ext_hook=lambda code, data: msgpack.ExtType(code, data))
    if dv.json:
        return json.loads(dv.json)
    return None


def _pack(pb, value: Any):
    import msgpack
    return pb.DynamicValue(msgpack=msgpack.packb(value, use_bin_type=True))


def _is_unknown(v: Any) -> bool:
    import msgpack
    return isinstance(v, msgpack.ExtType)


def _unknown():
    import msgpack
    return msgpack.ExtType(0, _UNKNOWN_BYTES)


def _nested_objects(bt: dict, v: Any) -> list:
    """The object values of one nested block attribute, whatever its nesting mode."""
    if v is None or _is_unknown(v):
        return []
    mode = bt.get("nesting_mode", "list")
    if mode in ("single", "group"):
        return [v] if isinstance(v, dict) else []
    if mode == "map":
        return [x for x in v.values() if isinstance(x, dict)] if isinstance(v, dict) else []
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def plan_computed_unknown(block: dict, obj: dict) -> dict:
    """Computed attributes the config left null become unknown ("known after apply")."""
    for name, a in block.get("attributes", {}).items():
        if a.get("computed") and obj.get(name) is None:
            obj[name] = _unknown()
    for name, bt in block.get("block_types", {}).items():
        for child in _nested_objects(bt, obj.get(name)):
            plan_computed_unknown(bt.get("block", {}), child)
    return obj


def plan_tags_all(block: dict, obj: dict, default_tags: dict | None) -> dict:
    """The AWS provider plans tags_all = default_tags merged with tags when both are known."""
    attrs = block.get("attributes", {})
    if "tags_all" not in attrs or not _is_unknown(obj.get("tags_all")):
        return obj
    tags = obj.get("tags")
    known = (tags is None or (isinstance(tags, dict) and not any(_is_unknown(v) for v in tags.values())))
    if known and (tags or default_tags):
        obj["tags_all"] = {**(default_tags or {}), **(tags or {})}
    return obj


def _dummy(ty: Any, name: str, i: int = 0) -> Any:
    """A known stand-in for a data source's computed value, plausible enough for functions
    (cidrsubnet, jsondecode, indexing [0..2]) that configs apply to it."""
    if ty == "string":
        n = name.lower()
        if "cidr" in n:
            return f"10.{i}.0.0/16"
        if n.endswith("json") or "policy" in n or n == "document":
            return "{}"
        if n.endswith("arn") or n == "arn":
            return f"arn:aws:iam::123456789012:{name}-{i}"
        if "account" in n or n == "owner_id":
            return "123456789012"
        if "zone" in n or n == "names":
            return "us-east-1" + "abcdef"[i % 6]
        if "region" in n:
            return "us-east-1"
        return f"{name}-{i}"
    if ty == "number":
        return i + 1
    if ty == "bool":
        return False
    if ty == "dynamic":
        return None
    if isinstance(ty, list) and ty:
        kind = ty[0]
        if kind in ("list", "set"):
            return [_dummy(ty[1], name, k) for k in range(3)]
        if kind == "map":
            return {}
        if kind == "object":
            return {k: _dummy(t, k, i) for k, t in ty[1].items()}
        if kind == "tuple":
            return [_dummy(t, name, k) for k, t in enumerate(ty[1])]
    return None


def _well_known(type_name: str, region: str) -> dict:
    """Values configs commonly interpolate from ambient AWS data sources."""
    account = "123456789012"
    return {
        "aws_region": {"name": region, "id": region, "region": region,
                       "endpoint": f"ec2.{region}.amazonaws.com", "description": region},
        "aws_partition": {"partition": "aws", "id": "aws", "dns_suffix": "amazonaws.com",
                          "reverse_dns_prefix": "com.amazonaws"},
        "aws_caller_identity": {"account_id": account, "id": account, "user_id": "AIDAEXAMPLE",
                                "arn": f"arn:aws:iam::{account}:user/example"},
    }.get(type_name, {})


def fill_data_source(block: dict, obj: dict, type_name: str = "", region: str = "us-east-1") -> dict:
    known = _well_known(type_name, region)
    for name, a in block.get("attributes", {}).items():
        if a.get("computed") and (obj.get(name) is None or _is_unknown(obj.get(name))):
            obj[name] = known[name] if name in known else _dummy(a.get("type", "string"), name)
    for name, bt in block.get("block_types", {}).items():
        for child in _nested_objects(bt, obj.get(name)):
            fill_data_source(bt.get("block", {}), child)
    return obj


def config_diagnostics(type_name: str, schema: dict, config: Any, kind: str = "resource"):
    """(severity, summary, detail, path) found in a resource config, as the AWS provider's SDK
    reports them: computed-only attributes set (error), deprecated types and arguments (warning)."""
    out = []
    block = schema.get("block", {})
    type_deprecated = bool(block.get("deprecated"))
    if type_deprecated:
        out.append(("warning", f"Deprecated {kind}",
                    f"The {kind} type {type_name} is deprecated by the provider; use its successor.", []))

    def walk(b: dict, obj: Any, path: list):
        if not isinstance(obj, dict):
            return
        for name, a in b.get("attributes", {}).items():
            if obj.get(name) is None:
                continue
            if a.get("computed") and not a.get("optional") and not a.get("required"):
                out.append(("error", "Value for unconfigurable attribute",
                            f'Can\'t configure a value for "{name}": its value will be decided '
                            "automatically based on the result of applying this configuration.",
                            path + [name]))
            elif a.get("deprecated") and not type_deprecated:
                out.append(("warning", "Argument is deprecated",
                            f'The argument "{name}" of {type_name} is deprecated.', path + [name]))
        for name, bt in b.get("block_types", {}).items():
            v = obj.get(name)
            if bt.get("block", {}).get("deprecated") and _nested_objects(bt, v) and not type_deprecated:
                out.append(("warning", "Block is deprecated",
                            f'The block "{name}" of {type_name} is deprecated.', path + [name]))
            for child in _nested_objects(bt, v):
                walk(bt.get("block", {}), child, path + [name])

    walk(block, config, [])
    return out


# ---------------------------------------------------------------- gRPC servicer
def _levenshtein(a: str, b: str, cap: int = 3) -> int:
    if abs(len(a) - len(b)) >= cap:
        return cap
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


class SchemaCatalog:
    """GetProviderSchema responses for one provider: the full one, or a subset holding only the
    types a config declares. Terraform decodes the whole schema on every run (~150 ms for AWS);
    a subset makes that ~1 ms. Near names of unknown types stay in, so "Did you mean" survives."""

    def __init__(self, provider_schema: dict):
        self.pb = _pb()
        self.resources = provider_schema.get("resource_schemas", {}) or {}
        self.data_sources = provider_schema.get("data_source_schemas", {}) or {}
        self._provider = _schema_pb(self.pb, provider_schema.get("provider"))
        self._meta = _schema_pb(self.pb, None)
        self._cache: dict[tuple[str, str], Any] = {}
        self._full = None
        self._lock = threading.Lock()

    def _one(self, kind: str, name: str):
        key = (kind, name)
        if key not in self._cache:
            table = self.resources if kind == "r" else self.data_sources
            self._cache[key] = _schema_pb(self.pb, table[name])
        return self._cache[key]

    def _near(self, name: str, table: dict) -> list[str]:
        return [t for t in table if _levenshtein(name, t) < 3]

    def response(self, types: list[str] | None = None, data: list[str] | None = None):
        with self._lock:
            if types is None and data is None:
                if self._full is None:
                    self._full = self._build(list(self.resources), list(self.data_sources))
                return self._full
            rs, ds = set(), set()
            for t in types or []:
                rs.update([t] if t in self.resources else self._near(t, self.resources))
            for t in data or []:
                ds.update([t] if t in self.data_sources else self._near(t, self.data_sources))
            return self._build(sorted(rs), sorted(ds))

    def _build(self, rs: list[str], ds: list[str]):
        pb = self.pb
        return pb.GetProviderSchema.Response(
            provider=self._provider, provider_meta=self._meta,
            resource_schemas={k: self._one("r", k) for k in rs},
            data_source_schemas={k: self._one("d", k) for k in ds},
            server_capabilities=pb.ServerCapabilities(plan_destroy=True, get_provider_schema_optional=True))


def make_servicer(provider_schema: dict | SchemaCatalog):
    """A tfplugin6 Provider servicer for one provider's part of a schema file. `.subset(types,
    data)` narrows the schema it serves (None, None: everything)."""
    from tf.gen import tfplugin_pb2_grpc as rpc
    catalog = provider_schema if isinstance(provider_schema, SchemaCatalog) else SchemaCatalog(provider_schema)
    pb = catalog.pb
    resources, data_sources = catalog.resources, catalog.data_sources
    current = {"resp": None, "default_tags": None}

    def diag(summary, detail="", path=(), severity=None):
        severity = {"error": pb.Diagnostic.ERROR, "warning": pb.Diagnostic.WARNING}.get(
            severity, severity or pb.Diagnostic.WARNING)
        d = pb.Diagnostic(severity=severity, summary=summary, detail=detail)
        if path:
            d.attribute.CopyFrom(pb.AttributePath(
                steps=[pb.AttributePath.Step(attribute_name=p) for p in path]))
        return d

    def error(summary, detail=""):
        return [diag(summary, detail, severity=pb.Diagnostic.ERROR)]

    class SchemaServicer(rpc.ProviderServicer):
        def subset(self, types=None, data=None):
            current["resp"] = catalog.response(types, data)

        def GetMetadata(self, request, context):
            return pb.GetMetadata.Response(server_capabilities=pb.ServerCapabilities(
                plan_destroy=True, get_provider_schema_optional=True))

        def GetProviderSchema(self, request, context):
            if current["resp"] is None:
                current["resp"] = catalog.response()
            return current["resp"]

        def ValidateProviderConfig(self, request, context):
            return pb.ValidateProviderConfig.Response()

        def ConfigureProvider(self, request, context):
            cfg = _unpack(request.config)
            dt = (cfg or {}).get("default_tags") if isinstance(cfg, dict) else None
            dt = dt[0] if isinstance(dt, list) and dt else dt
            tags = dt.get("tags") if isinstance(dt, dict) else None
            ok = isinstance(tags, dict) and not any(_is_unknown(v) for v in tags.values())
            current["default_tags"] = tags if ok else None
            region = (cfg or {}).get("region") if isinstance(cfg, dict) else None
            current["region"] = region if isinstance(region, str) and region else "us-east-1"
            return pb.ConfigureProvider.Response()

        def ValidateResourceConfig(self, request, context):
            s = resources.get(request.type_name, {})
            ds = config_diagnostics(request.type_name, s, _unpack(request.config))
            return pb.ValidateResourceConfig.Response(
                diagnostics=[diag(sm, dt, p, sev) for sev, sm, dt, p in ds])

        def ValidateDataResourceConfig(self, request, context):
            s = data_sources.get(request.type_name, {})
            ds = config_diagnostics(request.type_name, s, _unpack(request.config), "data source")
            return pb.ValidateDataResourceConfig.Response(
                diagnostics=[diag(sm, dt, p, sev) for sev, sm, dt, p in ds])

        def UpgradeResourceState(self, request, context):
            raw = request.raw_state.json or b"null"
            return pb.UpgradeResourceState.Response(upgraded_state=pb.DynamicValue(json=raw))

        def ReadResource(self, request, context):
            return pb.ReadResource.Response(new_state=request.current_state, private=request.private)

        def PlanResourceChange(self, request, context):
            proposed = _unpack(request.proposed_new_state)
            prior = _unpack(request.prior_state)
            if isinstance(proposed, dict) and prior is None:
                block = resources.get(request.type_name, {}).get("block", {})
                proposed = plan_computed_unknown(block, proposed)
                proposed = plan_tags_all(block, proposed, current["default_tags"])
            return pb.PlanResourceChange.Response(planned_state=_pack(pb, proposed))

        def ApplyResourceChange(self, request, context):
            return pb.ApplyResourceChange.Response(diagnostics=error(
                "apply is not supported", "This provider only serves a schema for validate and plan."))

        def ImportResourceState(self, request, context):
            return pb.ImportResourceState.Response(diagnostics=error("import is not supported"))

        def MoveResourceState(self, request, context):
            return pb.MoveResourceState.Response(diagnostics=error("moved blocks across types are not supported"))

        def ReadDataSource(self, request, context):
            cfg = _unpack(request.config)
            block = data_sources.get(request.type_name, {}).get("block", {})
            state = (fill_data_source(block, cfg, request.type_name, current.get("region") or "us-east-1")
                     if isinstance(cfg, dict) else cfg)
            return pb.ReadDataSource.Response(state=_pack(pb, state))

        def GetFunctions(self, request, context):
            return pb.GetFunctions.Response()

        def CallFunction(self, request, context):
            return pb.CallFunction.Response(error=pb.FunctionError(text="no provider functions"))

        def StopProvider(self, request, context):
            return pb.StopProvider.Response()

    return SchemaServicer()


def _grpc_server(servicer):
    import grpc
    from tf.gen import grpc_controller_pb2 as ctl_pb
    from tf.gen import grpc_controller_pb2_grpc as ctl_rpc
    from tf.gen import grpc_stdio_pb2_grpc as stdio_rpc
    from tf.gen import tfplugin_pb2_grpc as rpc

    stop = threading.Event()
    # Large schemas exceed gRPC's 4 MB default once serialized.
    opts = [("grpc.max_send_message_length", 512 << 20), ("grpc.max_receive_message_length", 512 << 20)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=opts)
    rpc.add_ProviderServicer_to_server(servicer, server)

    class Controller(ctl_rpc.GRPCControllerServicer):
        def Shutdown(self, request, context):
            stop.set()
            return ctl_pb.Empty()

    class Stdio(stdio_rpc.GRPCStdioServicer):
        def StreamStdio(self, request, context):
            return iter(())

    ctl_rpc.add_GRPCControllerServicer_to_server(Controller(), server)
    stdio_rpc.add_GRPCStdioServicer_to_server(Stdio(), server)
    return server, stop


def serve_managed(schema_path: str, address: str) -> None:
    """go-plugin handshake for a terraform-started provider (dev_overrides, naive mode)."""
    from tf.runner import _self_signed_cert
    raw = load_schema_dict(schema_path)
    if address not in raw["provider_schemas"]:
        raise InputError(f"provider {address} not in schema", path=schema_path,
                         expected=", ".join(provider_names(raw)))
    server, stop = _grpc_server(make_servicer(raw["provider_schemas"][address]))
    chain, creds = _self_signed_cert()
    with tempfile.TemporaryDirectory(prefix="vf-tfp-") as tmp:
        sock = f"{tmp}/plugin.sock"
        server.add_secure_port(f"unix://{sock}", creds)
        server.start()
        print(f"1|6|unix|{sock}|grpc|{base64.b64encode(chain).decode().rstrip('=')}", flush=True)
        while not stop.wait(0.05):
            pass
        server.stop(grace=0)


def serve_reattach(schema_path: str, slots: int = 4) -> None:
    """Serve every provider of the schema file, `slots` + 1 times, on unix sockets. Slot 0 always
    serves the full schema; slots 1.. serve whatever subset the parent asks for. Protocol on
    stdin/stdout, one JSON line each: first line out {"slots": [reattach, ...]}; then per request
    in {"slot": i, "types": [...]|null, "data": [...]|null} -> out {"ok": i}. Ends at stdin EOF."""
    raw = load_schema_dict(schema_path)
    addresses = provider_names(raw)
    catalogs = {a: SchemaCatalog(raw["provider_schemas"][a]) for a in addresses}
    tmp = tempfile.mkdtemp(prefix="vf-tfp-")
    servers, servicers, reattach = [], [], []
    for slot in range(slots + 1):
        entry, per_slot = {}, {}
        for i, addr in enumerate(addresses):
            servicer = make_servicer(catalogs[addr])
            server, _ = _grpc_server(servicer)
            sock = f"{tmp}/s{slot}p{i}.sock"
            server.add_insecure_port(f"unix://{sock}")
            server.start()
            servers.append(server)
            per_slot[addr] = servicer
            # Test=True: terraform neither kills nor waits for an unmanaged provider.
            entry[addr] = {"Protocol": "grpc", "ProtocolVersion": 6, "Pid": os.getpid(), "Test": True,
                           "Addr": {"Network": "unix", "String": sock}}
        servicers.append(per_slot)
        reattach.append(entry)
    signal.signal(signal.SIGTERM, lambda *_: sys.stdin.close())
    print(json.dumps({"slots": reattach}), flush=True)
    try:
        for line in sys.stdin:
            try:
                req = json.loads(line)
                slot = int(req["slot"])
                for addr, servicer in servicers[slot].items():
                    servicer.subset(req.get("types"), req.get("data"))
                print(json.dumps({"ok": slot}), flush=True)
            except Exception as exc:  # a bad request must not kill the shared process
                print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    except (ValueError, OSError):
        pass
    for s in servers:
        s.stop(grace=0)
    for f in Path(tmp).iterdir():
        f.unlink(missing_ok=True)
    os.rmdir(tmp)


# ---------------------------------------------------------------- client side: the process
class ProviderProcess:
    """One long-lived schema provider. `.env` points terraform at the full schema; `lease(types,
    data)` hands out a slot serving only those types, for one terraform run at a time."""

    def __init__(self, schema_path: str | os.PathLike, python: str | None = None, timeout_s: float = 60.0,
                 slots: int = 4):
        import queue
        self.schema_path = str(schema_path)
        raw = load_schema_dict(self.schema_path)  # fail early, in this process, on a bad file
        self.addresses = provider_names(raw)
        self._proc = subprocess.Popen(
            [python or sys.executable, "-m", "verifirst.verifiers.terraform._tf_provider_main", "--reattach",
             "--slots", str(slots), "--schema", self.schema_path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        line = self._read_line(timeout_s)
        try:
            self.slots = json.loads(line)["slots"]
        except (ValueError, KeyError, TypeError):
            self.close()
            raise RuntimeError(f"schema provider did not start: {line!r}") from None
        self.reattach = self.slots[0]
        self._free: "queue.Queue[int]" = queue.Queue()
        for i in range(1, len(self.slots)):
            self._free.put(i)
        self._ctl = threading.Lock()

    def _read_line(self, timeout_s: float) -> str:
        box: list[str] = []
        t = threading.Thread(target=lambda: box.append(self._proc.stdout.readline()), daemon=True)
        t.start()
        t.join(timeout_s)
        return box[0].strip() if box else ""

    @property
    def env(self) -> dict[str, str]:
        return {"TF_REATTACH_PROVIDERS": json.dumps(self.reattach)}

    def _subset(self, slot: int, types, data) -> None:
        with self._ctl:
            self._proc.stdin.write(json.dumps({"slot": slot, "types": types, "data": data}) + "\n")
            self._proc.stdin.flush()
            reply = self._read_line(30.0)
        if json.loads(reply or "{}").get("ok") != slot:
            raise RuntimeError(f"schema provider refused a subset: {reply!r}")

    def lease(self, types: list[str] | None = None, data: list[str] | None = None):
        """Context manager -> env for one terraform run against a schema of just these types."""
        import contextlib

        @contextlib.contextmanager
        def _lease():
            slot = self._free.get()
            try:
                self._subset(slot, types, data)
                yield {"TF_REATTACH_PROVIDERS": json.dumps(self.slots[slot])}
            finally:
                self._free.put(slot)
        return _lease()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_DECL_RE = re.compile(r'^[ \t]*(resource|data)[ \t]+"?([A-Za-z][\w-]*)"?', re.M)


def declared_types(files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(resource types, data source types) declared in .tf / .tf.json files."""
    rs, ds = set(), set()
    for name, text in files.items():
        if name.endswith(".tf.json"):
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            for part in doc if isinstance(doc, list) else [doc]:
                if isinstance(part, dict):
                    for key, bucket in (("resource", rs), ("data", ds)):
                        blocks = part.get(key) or {}
                        for b in blocks if isinstance(blocks, list) else [blocks]:
                            if isinstance(b, dict):
                                bucket.update(b)
        else:
            for kind, t in _DECL_RE.findall(text):
                (rs if kind == "resource" else ds).add(t)
    return sorted(rs), sorted(ds)


def write_launcher(directory: str | os.PathLike, schema_path: str, address: str = DEFAULT_AWS,
                   python: str | None = None) -> Path:
    """terraform-provider-<name> script for dev_overrides: terraform starts it per use."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    exe = d / f"terraform-provider-{short_name(address)}"
    py = python or sys.executable
    exe.write_text("#!/bin/sh\n"
                   f"exec {json.dumps(py)} -m verifirst.verifiers.terraform._tf_provider_main "
                   f"--schema {json.dumps(str(schema_path))} --provider {json.dumps(address)}\n")
    exe.chmod(0o755)
    return exe


_SHARED: dict[str, ProviderProcess] = {}
_SHARED_LOCK = threading.Lock()


def shared_provider(schema_path: str | os.PathLike) -> ProviderProcess:
    """One provider process per schema file for this Python process (restarted if it died)."""
    import atexit
    key = str(Path(schema_path).resolve())
    with _SHARED_LOCK:
        proc = _SHARED.get(key)
        if proc is None or not proc.alive():
            proc = ProviderProcess(key)
            if not _SHARED:
                atexit.register(close_shared)
            _SHARED[key] = proc
        return proc


def close_shared() -> None:
    with _SHARED_LOCK:
        for proc in _SHARED.values():
            proc.close()
        _SHARED.clear()
