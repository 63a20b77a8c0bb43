"""Judge checks that stand on the kernel alone: robustness to perturbed judged text (robustness)
and agreement among human labellers (agreement). They import only verifirst.core."""
