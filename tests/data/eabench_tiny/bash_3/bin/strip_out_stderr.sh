#!/bin/bash
# The run's stderr from the log.
sed -n 's/^.* stderr [FP] //p' "$1"
