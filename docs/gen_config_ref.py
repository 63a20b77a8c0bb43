"""The experiment-file reference page, generated from the schema in verifirst/config.py.

    python docs/gen_config_ref.py    # print the page (the docs build runs it through docs/hooks.py)
"""
from __future__ import annotations

import json
from typing import Any

INTRO = """# Experiment files

An experiment file is TOML: one table per section below. Unknown sections and keys, wrong types
and values out of range are refused before any work starts, with the file, the line and the key
named (exit 2). `verifirst run FILE` runs it; `vf.run(FILE)` is the same from Python.

This page is generated from the schema in `verifirst/config.py`, so it lists exactly what the
validator accepts.

Paths: `suite.path`, `splits.manifest` and the path options of a suite, program or verifier (a
Terraform verifier's `policy_dir`, ...) are read against the experiment file's folder, so the file
runs the same from any directory; `workdir` is where the command runs (where `verifirst ui` and
`verifirst report` look); `~` expands in every path. Numbers are finite (`nan` and `inf` are
refused alike). What reaches DSPy or MLflow is checked against what they accept before the run:
`[optimizer] options` against `dspy.GEPA`'s or `dspy.SIMBA`'s constructor (names and annotated
types; the arguments verifirst sets itself, such as `max_full_evals`, are refused with where to set
them), `experiment.name` and `tracking.experiment` against MLflow's name rules. Each refusal reads
`file:line [section.key]: what was given (expected: what is accepted)`.
"""


def _types(types: tuple[type, ...]) -> str:
    names = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "table",
             "list": "array"}
    shown = [t for t in types if not (t is int and float in types)]  # an integer is a number
    return " or ".join(names.get(t.__name__, t.__name__) for t in shown)


def _default(value: Any) -> str:
    if value is None:
        return "—"
    return f"`{json.dumps(value)}`" if not isinstance(value, bool) else f"`{str(value).lower()}`"


def _allowed(section: str, key: str, config: Any) -> str:
    ranges = getattr(config, "RANGES", {})
    choices = getattr(config, "CHOICES", {})
    if (section, key) in choices:
        return " \\| ".join(f"`{c}`" for c in choices[(section, key)])
    if (section, key) in ranges:
        low, high = ranges[(section, key)]
        if low is not None and high is not None:
            return f"{low} to {high}"
        return f"≥ {low}" if low is not None else f"≤ {high}"
    return ""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def section_table(section: str, keys: dict, config: Any) -> str:
    """One section's keys as a Markdown table: key, type, default, allowed values, meaning."""
    required = getattr(config, "REQUIRED", set())
    rows = ["| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
    for key, (types, default, help_text) in keys.items():
        name = f"`{key}`" + (" (required)" if (section, key) in required else "")
        rows.append(f"| {name} | {_types(types)} | {_default(default)} | {_allowed(section, key, config)} "
                    f"| {_cell(help_text)} |")
    return "\n".join(rows)


def model_keys_table(config: Any) -> str:
    """The keys of a model table (one endpoint for a role), where the schema defines them."""
    keys = getattr(config, "MODEL_KEYS", None)
    if not keys:
        return ""
    rows = ["| key | type | allowed |", "|---|---|---|"]
    for key, (types, low, high) in keys.items():
        allowed = ""
        if low is not None and high is not None:
            allowed = f"{low} to {high}"
        elif low is not None:
            allowed = f"≥ {low}"
        rows.append(f"| `{key}` | {_types(types)} | {allowed} |")
    return ("\n## A model as a table\n\nA role in `[models]` may be a table instead of a string, e.g. "
            "`task = { model = \"local\", max_tokens = 128 }`; these keys are accepted (a list of such "
            "tables names several endpoints, see [Integrations](../integrations.md#many-lm-endpoints)):\n\n"
            + "\n".join(rows) + "\n")


EXAMPLE = """
## Example

```toml
[experiment]
name = "bash-gepa"
workdir = ".verifirst"   # cache, runs, local MLflow store
threads = 4

[suite]
name = "bash-builtin"    # `verifirst components` lists suites, programs, verifiers

[program]
name = "bash-generator"
options = { variant = "cot" }

[verifier]
name = "bash-exec"       # sandboxed execution equivalence

[splits]
ratios = [0.5, 0.25, 0.25]

[optimizer]
name = "gepa"            # gepa | simba | autorefine | none
max_metric_calls = 200

[models]
task = "local"                     # or any LiteLLM model string
reflection = "openai/gpt-4o-mini"
```

Unknown keys and wrong types are refused with file, line and key, and so are, before anything is
written (exit 2): values out of range (`threads` 1 to 256, `max_error_rate` 0 to 1, `limit`,
`max_iters` and `max_metric_calls` from 1, temperatures 0 to 2, ports 1 to 65535), a typo in a model
table (`temprature`, with the nearest key), a program or verifier option its factory does not take
(`variantt`) or a value it refuses (`variant = "tot"`), options for optimizer `none`, a workdir that
is a file or cannot be written, and an experiment or outcomes file that is a directory, a symlink
loop, binary or not UTF-8. A validation or test fraction of 0 is refused unless asked for:
`no_val = true` / `no_test = true` under `[splits]` (`--no-test` for `calibrate`, `no_val=True` /
`no_test=True` for `vf.optimize`); a run without a test split reports no test number. What each
optimizer needs is checked before it starts (GEPA and SIMBA: training items, GEPA selecting on
train under `no_val`; AutoRefine: validation items too). A plain metric must take `(example, pred)`;
one returning a string, a dict or NaN gives ERROR rows, never a score. `tests/data/bad_inputs/`
holds a corpus of refused inputs with the message each must give. `--run-dir DIR` names the run
directory; running again with the same directory after a crash resumes (finished evaluations and
GEPA's checkpoint are kept). A second identical run is served from the DSPy cache in the workdir
and says so ("0 to the model").

Runs at once: a run holds an OS lock (`flock`) on `RUN_DIR/run.lock` while it uses the directory
(`verifirst run`, `verifirst calibrate`, `vf.optimize`). A second run on the same directory is
refused at once, before it writes there or to MLflow, with exit 2: `run directory X is in use by
process PID on HOST since TIME`. The lock dies with its process, so after a `kill -9` the next run
takes the directory and resumes. Runs with different run directories (the default: a new one per run)
share one workdir safely: the local MLflow store (`mlflow.db`) is created under a lock file
beside it (`mlflow.db.lock`), so two first runs on a fresh workdir both finish, and the test-reuse
ledger appends whole lines under its own lock.

Components from other packages (plugins): [Architecture](../architecture.md#components-from-another-package).
"""


def page() -> str:
    """The whole page, Markdown."""
    from verifirst import config
    parts = [INTRO, EXAMPLE]
    for section, keys in config.SCHEMA.items():
        parts.append(f"\n## [{section}]\n\n{section_table(section, keys, config)}\n")
    parts.append(model_keys_table(config))
    return "\n".join(parts)


if __name__ == "__main__":
    print(page())
