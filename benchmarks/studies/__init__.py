"""Research studies: each runs an experiment over a suite and reports numbers (`verifirst bench NAME`)."""
