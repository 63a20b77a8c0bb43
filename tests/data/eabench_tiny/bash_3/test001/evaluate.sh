#!/bin/bash
# Test-specific evaluator: arguments <test> <suite> <work dir>; exit 0 pass, 2 fail.
wrkdir=$3
cd "$wrkdir" || exit 2
if [ "$(strip_out_stderr.sh podman.log | wc -l)" != 0 ]; then
    echo >&2 "Command had runtime errors"
    exit 2
fi
strip_out_stdout.sh podman.log | grep -qx 55 || { echo >&2 "Expected 55"; exit 2; }
exit 0
