"""A regular (non-editable) install carries every module and data file the package needs."""
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_wheel_has_all_packages_and_data(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(REPO)], check=True, capture_output=True, cwd=tmp_path)
    wheel = next(tmp_path.glob("verifirst-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in ("verifirst/cli.py", "verifirst/programs/bash.py", "verifirst/verifiers/base.py",
                 "verifirst/optimizers/gepa.py", "verifirst/retrieval/embedder.py",
                 "verifirst/benchmarks/perf/lm_overhead.py", "verifirst/benchmarks/data/bash_pack.json",
                 "verifirst/benchmarks/studies/feh_quality.py", "verifirst/verifiers/bash/sandbox.py",
                 "verifirst/verifiers/bash/data/feh_params_nl2sh.json", "verifirst/verifiers/terraform/verifier.py",
                 "verifirst/verifiers/terraform/_tf_provider_main.py",
                 "verifirst/verifiers/terraform/data/iac_builtin_schema.json",
                 "verifirst/verifiers/terraform/data/aws/aws_provider_schema_6.47.0.slim.json.gz",
                 "verifirst/verifiers/terraform/data/aws/aws_provider_schema_5.100.0.slim.json.gz",
                 "verifirst/verifiers/terraform/data/aws/NOTICE"):
        assert path in names, path
    assert any(n.startswith("verifirst/benchmarks/data/iac_pack/") for n in names)
    assert not any(n.startswith("tests/") for n in names)
    entry = [n for n in names if n.endswith("entry_points.txt")]
    declared = zipfile.ZipFile(wheel).read(entry[0]).decode() if entry else ""
    assert "verifirst = verifirst.cli:main" in declared
    # the built-in components: each domain registers itself through the plugins' entry-point group
    assert "[verifirst.components]" in declared
    for domain in ("programs", "verifiers", "optimizers", "benchmarks"):
        assert f"{domain} = verifirst.{domain}:register" in declared, declared
