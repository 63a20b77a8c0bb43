"""Core protocols, the bottom layer: items and suites, verdicts, the metric, the engine and callback
protocols, the component registry, errors, statistics and atomic files. Imports nothing above it."""
