#!/bin/bash
# Test-specific evaluator: arguments <test> <suite> <work dir>; exit 0 pass, 2 fail.
wrkdir=$3
cd "$wrkdir" || exit 2
if [ "$(strip_out_stderr.sh podman.log | wc -l)" != 0 ]; then
    echo >&2 "Command had runtime errors"
    exit 2
fi
out=$(strip_out_stdout.sh podman.log)
for p in "3 5" "5 7" "11 13" "17 19"; do grep -qx "$p" <<< "$out" || { echo >&2 "Expected the pair $p"; exit 2; }; done
[ "$(grep -c . <<< "$out")" = 4 ] || { echo >&2 "Expected exactly four pairs up to 20"; exit 2; }
exit 0
