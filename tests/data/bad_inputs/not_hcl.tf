this is not hcl {{{
