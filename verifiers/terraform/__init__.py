"""The terraform toolchain: the staged verifier (verifier.py), terraform CLI and schema provider,
the pure-Python HCL checks and plan synthesis, OPA policies and the IaC error taxonomy."""
