#!/bin/bash
# Test-specific evaluator: arguments <test> <suite> <work dir>; exit 0 pass, 2 fail.
wrkdir=$3
cd "$wrkdir" || exit 2
if [ "$(strip_out_stderr.sh podman.log | wc -l)" != 0 ]; then
    echo >&2 "Command had runtime errors"
    exit 2
fi
T=home/test/uploads.targets
for f in file1.dat file3.dat; do grep -qx "$f" "$T" || { echo >&2 "$T should list $f"; exit 2; }; done
[ "$(wc -l < "$T")" = 2 ] || { echo >&2 "$T should list only file1.dat and file3.dat"; exit 2; }
exit 0
