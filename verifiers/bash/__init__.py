"""The bash toolchain: bubblewrap sandbox, fixtures, FEH execution equivalence and shell gates."""
