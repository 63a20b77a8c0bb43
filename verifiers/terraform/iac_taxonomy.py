"""Stages and error classes of the Terraform verifier (S3's taxonomy), shared by every backend."""
from __future__ import annotations

PASS = "PASS"
VALIDATE_FAIL = "VALIDATE_FAIL"
PLAN_FAIL = "PLAN_FAIL"
OPA_FAIL = "OPA_FAIL"
SCANNER_FAIL = "SCANNER_FAIL"  # the optional checkov gate, after the policy
STAGES = (VALIDATE_FAIL, PLAN_FAIL, OPA_FAIL, SCANNER_FAIL, PASS)  # funnel order
# A repair loop's outcome, not a verifier's: every gate passed, but the repair dropped what the task
# needs (verifiers/terraform/deceptive.py). Repair metrics and transition tables place it before PASS.
DECEPTIVE_FIX = "DECEPTIVE_FIX"
REPAIR_STAGES = (VALIDATE_FAIL, PLAN_FAIL, OPA_FAIL, SCANNER_FAIL, DECEPTIVE_FIX, PASS)
# No verdict (passed None, counted apart): part of the configuration could not be checked (a
# provider with no schema, a module that cannot be read) and nothing else failed.
INCONCLUSIVE = "INCONCLUSIVE"  # the kernel's stage of the same name (verifirst.core.verdicts)

SELF_DEFINED_PROPERTY = "SELF_DEFINED_PROPERTY"  # unsupported argument / block / attribute
INVALID_RESOURCE_TYPE = "INVALID_RESOURCE_TYPE"
MISSING_REQUIRED = "MISSING_REQUIRED"
TYPE = "TYPE"
SYNTAX = "SYNTAX"
BAD_REFERENCE = "BAD_REFERENCE"
CYCLE = "CYCLE"
BLOCK_COUNT = "BLOCK_COUNT"
POLICY = "POLICY"
POLICY_ENGINE_GAP = "POLICY_ENGINE_GAP"  # e.g. regopy lacks net.cidr_*: not the model's fault
SCANNER = "SCANNER"  # a failed checkov check (its id and guideline in the message)
DECEPTIVE = "DECEPTIVE"  # a repair dropped a required resource or attribute
NOT_CHECKED = "NOT_CHECKED"  # what made a verdict INCONCLUSIVE: no schema for its provider, no module
LIMIT = "LIMIT"  # past a documented verifier ceiling (limits.py): count bombs, deep nesting, memory
OTHER = "OTHER"
ERROR_CLASSES = (SELF_DEFINED_PROPERTY, INVALID_RESOURCE_TYPE, MISSING_REQUIRED, TYPE, SYNTAX,
                 BAD_REFERENCE, CYCLE, BLOCK_COUNT, POLICY, POLICY_ENGINE_GAP, SCANNER, DECEPTIVE, LIMIT,
                 NOT_CHECKED, OTHER)
