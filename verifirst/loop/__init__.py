"""The loop layer: `driver.run` (the one run loop) with what it needs: splits and their guard,
evaluation, the test-reuse ledger, the run directory, executors, preflight checks, labels and
promotion rules. Imports core and the LM layer only."""
