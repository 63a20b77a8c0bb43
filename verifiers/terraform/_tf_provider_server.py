"""The schema provider's server side: the GetProviderSchema catalog (full or a subset), the
tfplugin6 Provider servicer, and the two ways to serve it (managed by terraform, or reattached:
one process for many terraform runs)."""
from __future__ import annotations

import base64
import json
import os
import signal
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

from verifirst.core.errors import InputError
from verifirst.verifiers.terraform._tf_provider_schema import _pb, _schema_pb, load_schema_dict, provider_names
from verifirst.verifiers.terraform._tf_provider_values import (_is_unknown, _pack, _unpack, config_diagnostics,
                                                               fill_data_source, plan_computed_unknown, plan_tags_all)


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

