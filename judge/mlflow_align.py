"""The judge-calibration anchors a user would otherwise pick: MLflow `make_judge` + `Judge.align()`
with each of MLflow's aligners (SIMBA, GEPA, MemAlign; whichever the installed MLflow has),
trained on our train split and scored on our test items.

Mapping of our outcome Items onto what `align()` consumes (mlflow/genai/judges/optimizers/
dspy_utils.py `trace_to_dspy_example`): one MLflow trace per train item, whose root span's
inputs are the rendered view (align reads them back verbatim as the judge's `{{ inputs }}`),
plus one HUMAN-sourced Feedback named like the judge whose value is the label (PASS/FAIL).
Test items are scored by calling the judge with the same rendering, so train and test prompts
have one format. The anchor never sees a test item before scoring (the manifest's guard).

Facts of the installed MLflow (3.17) that shape this anchor and its report:
- SIMBA and GEPA align() need >= 10 labelled traces (MemAlign has no minimum); none has a
  validation split (train only; GEPA's valset defaults to its trainset) and their metric is
  exact-match agreement, not π. GEPA's budget defaults to 4 metric calls per trace and its
  reflection LM is the optimizer's model.
- MemAlign returns a memory-augmented judge (distilled guidelines + retrieved examples) and
  needs an embedding model; with the local endpoint the offline MiniLM serves it in process
  (LiteLLM provider `verifirst_embed`), as the endpoint serves chat only.
- The aligned judge is rebuilt with `make_judge(name, instructions, model, type)`: base_url and
  inference_params are dropped, so endpoint and temperature must come from the environment
  (OPENAI_API_BASE) and the server's default. SIMBA's per-candidate temperature=1.0 LM copies
  never reach the judge (its program calls the judge's model directly); without a server-side
  default temperature > 0 every candidate answers alike, no bucket has a score gap, and only
  demos (never rules) can be added. OpenAI's own default is 1.0, so `align_temperature`
  defaults to that; test scoring uses `test_temperature` (0: deterministic, paired).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")

from verifirst.core.errors import InputError  # noqa: E402
from verifirst.core.task import Item  # noqa: E402
from verifirst.core.verdicts import normalize_label
from verifirst.judge.pool import as_pool

JUDGE_NAME = "outcome"
LOCAL_MODEL_URI = "openai:/smollm2"
DEFAULT_MAX_TOKENS = 160  # served model's budget per answer (same cap as our embedded judge role)
MIN_TRACES = 10  # DSPyAlignmentOptimizer._MINIMUM_TRACES_REQUIRED_FOR_OPTIMIZATION
DEFAULT_INSTRUCTIONS = (
    "You review a proposed code change or generated code before it is accepted. Read every "
    "field of the view. Answer PASS if the code does what the task asks and is safe to accept, "
    "FAIL if it is wrong, incomplete or unsafe."
)
_TEMPLATE_VARS = ("{{ inputs }}", "{{inputs}}", "{{ outputs }}", "{{outputs}}", "{{ trace }}",
                  "{{trace}}", "{{ expectations }}", "{{expectations}}", "{{ conversation }}")


def render_view(view: dict, view_fields: Sequence[str]) -> str:
    """The text the MLflow judge sees as `{{ inputs }}`, for train traces and test calls alike."""
    return "\n\n".join(f"{f}:\n{view.get(f, '')}" for f in view_fields)


def judge_instructions(instructions: str) -> str:
    """make_judge needs a template variable; ours judge the view, so point at `{{ inputs }}`."""
    if any(v in instructions for v in _TEMPLATE_VARS):
        return instructions
    return (f"{instructions.rstrip()}\n\nThe view under review is in {{{{ inputs }}}}. "
            f"The result is exactly PASS or FAIL.")


def _verdict(value: Any) -> str | None:
    return normalize_label(value, prefix=True)


def _label(it: Item, label_key: str) -> str:
    lab = _verdict(it.gold.get(label_key))
    if lab is None:
        raise InputError(f"item {it.id!r} has no PASS/FAIL label", field=f"gold.{label_key}",
                         expected="PASS or FAIL")
    return lab


class _CountingEngine:
    """Counts calls per phase and records prompts, so reports give cost and tests can prove
    which texts reached the model during alignment."""

    def __init__(self, inner):
        self.inner = inner
        self.phase = "setup"
        self.calls: dict[str, int] = {}
        self.prompts: dict[str, list[str]] = {}
        self.default_temperature: float | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def complete(self, request):
        text = "\n".join([str(request.system or "")] + [m.text or "" for m in request.messages])
        with self._lock:
            self.calls[self.phase] = self.calls.get(self.phase, 0) + 1
            self.prompts.setdefault(self.phase, []).append(text)
        if request.config.temperature is None and self.default_temperature is not None:
            import dataclasses

            request = dataclasses.replace(request, config=dataclasses.replace(
                request.config, temperature=self.default_temperature))
        return self.inner.complete(request)


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _mlflow_at(tracking_uri: str, experiment: str) -> Iterator[str]:
    """Point MLflow's fluent API at a store for the block, then put the caller's back."""
    import mlflow
    import mlflow.tracking._tracking_service.utils as tu
    import mlflow.tracking.fluent as fl

    import mlflow.tracking._model_registry.utils as ru

    prev_uri, prev_registry, prev_exp = tu._tracking_uri, ru._registry_uri, fl._active_experiment_id
    # set_tracking_uri and set_experiment also write these into the process environment, where the
    # caller's next MLflow call (another store, another experiment) would find them
    prev_env = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "MLFLOW_EXPERIMENT_ID")}
    mlflow.set_tracking_uri(tracking_uri)
    try:
        yield mlflow.set_experiment(experiment).experiment_id
    finally:
        mlflow.set_tracking_uri(prev_uri)  # also resets the trace exporter to that store
        ru._registry_uri, fl._active_experiment_id = prev_registry, prev_exp
        for k, v in prev_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def log_outcome_traces(items: Sequence[Item], view_fields: Sequence[str], judge_name: str = JUDGE_NAME,
                       label_key: str = "label", source_id: str = "verifirst-outcome") -> list:
    """One trace per item (root span inputs = rendered view) with its label as HUMAN feedback,
    in the active MLflow experiment; returns the traces as read back from the store."""
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    ids = []
    for it in items:
        label = _label(it, label_key)
        with mlflow.start_span(name="outcome_view") as span:
            span.set_inputs(render_view(it.inputs, view_fields))
            span.set_attribute("verifirst.item_id", it.id)
        mlflow.log_feedback(trace_id=span.trace_id, name=judge_name, value=label,
                            rationale=str(it.gold.get("rationale") or f"outcome label {label}"),
                            source=AssessmentSource(source_type=AssessmentSourceType.HUMAN,
                                                    source_id=source_id))
        ids.append(span.trace_id)
    with contextlib.suppress(Exception):
        mlflow.flush_trace_async_logging()
    return [mlflow.get_trace(t) for t in ids]


def score_judge(judge, items: Sequence[Item], view_fields: Sequence[str],
                threads: int = 1) -> tuple[dict[str, str | None], dict[str, str]]:
    """Per-item verdicts (None on an LM error) and the error texts; `threads` judge calls in parallel."""
    def one(it: Item):
        try:
            fb = judge(inputs=render_view(it.inputs, view_fields))
        except Exception as e:  # an LM or parse failure is not a FAIL
            return it.id, None, f"{type(e).__name__}: {str(e)[:300]}"
        if getattr(fb, "error", None):
            return it.id, None, str(fb.error)[:300]
        v = _verdict(fb.value)
        return it.id, v, None if v else f"judge answered {fb.value!r}"

    rows = as_pool(threads).map(one, items)
    return {i: v for i, v, _ in rows}, {i: e for i, _, e in rows if e}


@dataclass
class AnchorResult:
    verdicts: dict[str, dict[str, str | None]]  # "mlflow_unaligned" / "mlflow_<aligner>" -> id -> verdict
    errors: dict[str, dict[str, str]]
    instructions: dict[str, str]
    metadata: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"verdicts": self.verdicts, "errors": self.errors, "instructions": self.instructions,
                "metadata": self.metadata}


# -- MLflow's aligners -------------------------------------------------------------------
ALIGNERS = ("simba", "gepa", "memalign")
_OPTIMIZER_CLASS = {"simba": "SIMBAAlignmentOptimizer", "gepa": "GEPAAlignmentOptimizer",
                    "memalign": "MemAlignOptimizer"}
EMBED_PROVIDER = "verifirst_embed"  # an in-process LiteLLM provider: MemAlign's embeddings offline


def verdict_key(aligner: str) -> str:
    """The verdict key of an aligner's judge in AnchorResult (`mlflow_simba`, ...)."""
    return f"mlflow_{aligner}"


def parse_aligners(spec: str | Sequence[str]) -> list[str]:
    """"all", "simba,gepa" or a list -> aligner names in a fixed order; unknown names are input errors.

    Args:
        spec: the aligner names, comma-separated or as a sequence; "all" names every one.
    """
    names = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s and s.strip()]
    if "all" in names:
        return list(ALIGNERS)
    unknown = [n for n in names if n not in ALIGNERS]
    if unknown or not names:
        raise InputError(f"unknown aligner(s) {unknown or names}", field="aligners",
                         expected="simba, gepa, memalign or all")
    return [a for a in ALIGNERS if a in names]


def available_aligners() -> dict[str, str | None]:
    """Per aligner: None when the installed MLflow has it, else why it is missing."""
    import mlflow

    try:
        import mlflow.genai.judges.optimizers as opts
    except Exception as e:  # an MLflow without judge optimizers at all
        return {a: f"mlflow {mlflow.__version__} has no judge optimizers ({type(e).__name__})" for a in ALIGNERS}
    return {a: None if hasattr(opts, _OPTIMIZER_CLASS[a])
            else f"mlflow {mlflow.__version__} has no {_OPTIMIZER_CLASS[a]}" for a in ALIGNERS}


def _min_traces(aligner: str, batch_size: int | None) -> int:
    if aligner == "simba":
        return max(MIN_TRACES, batch_size or 0)
    return MIN_TRACES if aligner == "gepa" else 1  # MemAlign has no minimum


_EMBEDDER: dict[str, Any] = {}


def _embedding_uri(fn) -> str:
    """Register `fn(texts) -> vectors` as LiteLLM provider `verifirst_embed` (once per process); its URI."""
    import litellm
    from litellm.llms.custom_llm import CustomLLM

    _EMBEDDER["fn"] = fn
    if not any(p.get("provider") == EMBED_PROVIDER for p in litellm.custom_provider_map):
        class _Embeddings(CustomLLM):
            def embedding(self, model, input, model_response, print_verbose, logging_obj, optional_params,
                          api_key=None, api_base=None, timeout=None, litellm_params=None):
                vectors = _EMBEDDER["fn"]([str(x) for x in input])
                model_response.data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                                       for i, v in enumerate(vectors)]
                model_response.model = model
                return model_response

        litellm.custom_provider_map = [*litellm.custom_provider_map,
                                       {"provider": EMBED_PROVIDER, "custom_handler": _Embeddings()}]
        litellm.utils.custom_llm_setup()
    return f"{EMBED_PROVIDER}:/minilm"


def _minilm(texts: list[str]) -> list[list[float]]:
    from verifirst.retrieval.embedder import embed

    return embed(texts).tolist()


def _make_optimizer(aligner: str, model: str, *, batch_size, seed, threads, simba_kwargs, gepa_kwargs,
                    gepa_max_metric_calls, memalign_kwargs, embedding_model) -> tuple[Any, dict]:
    from mlflow.genai.judges import optimizers as opts

    if aligner == "simba":
        kwargs = dict(simba_kwargs or {})
        kwargs.setdefault("num_threads", threads)  # DSPy's keyword, only here
        opt = opts.SIMBAAlignmentOptimizer(model=model, batch_size=batch_size, seed=seed, simba_kwargs=kwargs)
        return opt, {"bsize": opt._get_batch_size(), "seed": seed,
                     **{k: v for k, v in kwargs.items() if isinstance(v, (int, float, str))}}
    if aligner == "gepa":
        kwargs = dict(gepa_kwargs or {})
        kwargs.setdefault("num_threads", threads)  # DSPy's keyword, only here
        kwargs.setdefault("seed", seed)
        opt = opts.GEPAAlignmentOptimizer(model=model, max_metric_calls=gepa_max_metric_calls, gepa_kwargs=kwargs)
        return opt, {"max_metric_calls": gepa_max_metric_calls or "4 x traces (MLflow default)",
                     **{k: v for k, v in kwargs.items() if isinstance(v, (int, float, str))}}
    kwargs = dict(memalign_kwargs or {})
    opt = opts.MemAlignOptimizer(reflection_lm=model, embedding_model=embedding_model, **kwargs)
    return opt, {"embedding_model": embedding_model or "MLflow default",
                 **{k: v for k, v in kwargs.items() if isinstance(v, (int, float, str))}}


def align_anchor(train_items: Sequence[Item], test_items: Sequence[Item], view_fields: Sequence[str] | None = None,
                 instructions: str = DEFAULT_INSTRUCTIONS, model_uri: str | None = None, *, manifest=None,
                 engine=None, optimizer_model_uri: str | None = None, simba_kwargs: dict | None = None,
                 batch_size: int | None = None, seed: int = 42, tracking_uri: str | None = None,
                 workdir: str | Path | None = None, experiment: str = "verifirst-judge-anchor",
                 align_temperature: float | None = 1.0, test_temperature: float | None = 0.0,
                 judge_name: str = JUDGE_NAME, label_key: str = "label", threads: int = 1,
                 score_unaligned: bool = True, max_tokens: int | None = DEFAULT_MAX_TOKENS,
                 aligners: Sequence[str] | str = ("simba",), gepa_kwargs: dict | None = None,
                 gepa_max_metric_calls: int | None = None, memalign_kwargs: dict | None = None,
                 embedding_model: str | None = None, embedder=None) -> AnchorResult:
    """Run MLflow's make_judge (+ align() with each aligner named) on train, score every judge on test.

    model_uri None serves `engine` (default: the embedded SmolLM2) on 127.0.0.1 and uses
    "openai:/smollm2"; any other MLflow model URI is used as is (its provider's environment).
    max_tokens: the served model's budget when a request names none (aligned judges can't).
    `manifest` (a SplitManifest) admits train ids to the optimizer and checks test ids.
    aligners: any of "simba", "gepa", "memalign" (or "all"); each aligned judge's verdicts are
    under `mlflow_<aligner>`. One the installed MLflow lacks, or too few train traces for, is
    reported in metadata["skipped_aligners"] with the reason; one that fails in
    metadata["aligners"][name]["error"] (and in metadata["align_error"]).
    embedding_model: MemAlign's embedding model URI; with the local endpoint and none given,
    `embedder(texts) -> vectors` (default: the offline MiniLM) serves it in process.
    """
    names = parse_aligners(aligners)
    train_items, test_items = list(train_items), list(test_items)
    if not test_items:
        raise InputError("no test items to score", field="test_items", expected="the held-out split")
    if manifest is not None:
        manifest.admit_to_optimizer([it.id for it in train_items], who="mlflow-align")
        manifest.check_test([it.id for it in test_items])
    overlap = {it.id for it in train_items} & {it.id for it in test_items}
    if overlap:
        raise InputError(f"{len(overlap)} item(s) are in both train and test, e.g. {sorted(overlap)[:3]}",
                         field="test_items", expected="disjoint splits")
    view_fields = list(view_fields or sorted((train_items or test_items)[0].inputs))
    for it in train_items:
        _label(it, label_key)
    meta: dict[str, Any] = {"framework": "mlflow", "n_train": len(train_items), "n_test": len(test_items),
                            "view_fields": view_fields, "judge_name": judge_name,
                            "optimizer": "+".join(_OPTIMIZER_CLASS[a].replace("AlignmentOptimizer", "")
                                                  .replace("Optimizer", "") for a in names),
                            "align_metric": "exact-match agreement (MLflow agreement_metric)",
                            "align_uses_validation": False, "aligners_requested": names,
                            "aligners": {}, "skipped_aligners": {}}
    with contextlib.ExitStack() as stack:
        counter = None
        if model_uri is None:
            from verifirst.lm.local_server import serve_local

            if engine is None:
                from verifirst.lm import local_engine

                engine = local_engine()
            counter = _CountingEngine(engine)
            url, stop = serve_local(counter, default_max_tokens=max_tokens)
            stack.callback(stop)
            # the judge's own endpoint and key come from the environment: align() drops base_url
            stack.enter_context(_env(OPENAI_API_BASE=url, OPENAI_API_KEY=os.environ.get(
                "VERIFIRST_LOCAL_API_KEY", "local-no-key")))
            model_uri = LOCAL_MODEL_URI
            meta["local_server"] = url
            # server defaults, used only where a request names none (MLflow's judges never do)
            meta["served_defaults"] = {"align_temperature": align_temperature,
                                       "test_temperature": test_temperature, "max_tokens": max_tokens}
            if "memalign" in names and embedding_model is None:
                embedding_model = _embedding_uri(embedder or _minilm)
        if "MLFLOW_MODEL_CATALOG_URI" not in os.environ:
            # else every judge process first tries to download MLflow's model catalog (~7 s offline)
            stack.enter_context(_env(MLFLOW_MODEL_CATALOG_URI=""))
        meta["model_uri"] = model_uri
        if tracking_uri is None:
            root = Path(workdir) if workdir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
            root.mkdir(parents=True, exist_ok=True)
            tracking_uri = f"sqlite:///{(root / 'anchor_mlflow.db').resolve()}"
        meta["tracking_uri"] = tracking_uri

        from typing import Literal

        from mlflow.genai.judges import make_judge

        base = make_judge(name=judge_name, instructions=judge_instructions(instructions), model=model_uri,
                          feedback_value_type=Literal["PASS", "FAIL"])
        out = AnchorResult(verdicts={}, errors={}, instructions={"mlflow_unaligned": base.instructions},
                           metadata=meta)

        def phase(name: str, temperature: float | None) -> None:
            if counter is not None:
                counter.phase, counter.default_temperature = name, temperature

        if score_unaligned:
            phase("test_unaligned", test_temperature)
            t0 = time.perf_counter()
            out.verdicts["mlflow_unaligned"], out.errors["mlflow_unaligned"] = score_judge(
                base, test_items, view_fields, threads)
            meta["unaligned_test_s"] = round(time.perf_counter() - t0, 2)

        missing = available_aligners()
        runnable = []
        for a in names:
            need = _min_traces(a, batch_size if a == "simba" else None)
            if missing[a]:
                meta["skipped_aligners"][a] = missing[a]
            elif len(train_items) < need:
                meta["skipped_aligners"][a] = (f"MLflow's {a.upper() if a != 'memalign' else 'MemAlign'} aligner "
                                               f"needs at least {need} labelled train traces, got {len(train_items)}")
            else:
                runnable.append(a)
        for a, why in meta["skipped_aligners"].items():
            meta["aligners"][a] = {"status": "skipped", "reason": why}
        if not runnable:
            if meta["skipped_aligners"]:
                meta["align_error"] = "; ".join(meta["skipped_aligners"].values())
            return _finish(out, counter)

        errors = []
        with _mlflow_at(tracking_uri, experiment) as exp_id:
            meta["experiment_id"] = exp_id
            phase("traces", None)
            traces = log_outcome_traces(train_items, view_fields, judge_name, label_key)
            meta["train_trace_ids"] = [t.info.trace_id for t in traces]
            for a in runnable:
                opt, settings = _make_optimizer(
                    a, optimizer_model_uri or model_uri, batch_size=batch_size, seed=seed, threads=threads,
                    simba_kwargs=simba_kwargs, gepa_kwargs=gepa_kwargs, gepa_max_metric_calls=gepa_max_metric_calls,
                    memalign_kwargs=memalign_kwargs, embedding_model=embedding_model)
                row: dict[str, Any] = {"status": "aligned", "settings": settings}
                meta["aligners"][a] = row
                phase("align" if a == "simba" else f"align_{a}", align_temperature)
                t0 = time.perf_counter()
                try:
                    aligned = base.align(traces, optimizer=opt)
                except Exception as e:
                    row.update(status="error", error=f"{type(e).__name__}: {str(e)[:500]}")
                    errors.append(f"{a}: {row['error']}")
                    aligned = None
                row["align_s"] = round(time.perf_counter() - t0, 2)
                if aligned is None:
                    continue
                key = verdict_key(a)
                out.instructions[key] = aligned.instructions
                row["changed"] = aligned.instructions != base.instructions
                phase("test_aligned" if a == "simba" else f"test_{a}", test_temperature)
                t0 = time.perf_counter()
                out.verdicts[key], out.errors[key] = score_judge(aligned, test_items, view_fields, threads)
                row["test_s"] = round(time.perf_counter() - t0, 2)
        if errors or meta["skipped_aligners"]:
            meta["align_error"] = "; ".join(errors + list(meta["skipped_aligners"].values()))
        simba = meta["aligners"].get("simba", {})
        if "settings" in simba:  # the keys of the SIMBA-only anchor, kept for its readers
            meta["simba"], meta["align_s"] = simba["settings"], simba["align_s"]
            if "changed" in simba:
                meta["aligned_changed"] = simba["changed"]
                ins = out.instructions["mlflow_simba"]
                meta["aligned_demos"] = ins.count("\nExample ") + ins.startswith("Example ")
                meta["aligned_test_s"] = simba["test_s"]
        return _finish(out, counter)


def _finish(out: AnchorResult, counter) -> AnchorResult:
    if counter is not None:
        out.metadata["lm_calls"] = dict(counter.calls)
    return out
