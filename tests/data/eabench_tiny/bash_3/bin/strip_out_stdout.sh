#!/bin/bash
# The run's stdout from a log of " stdout F line" / " stderr F line" records, without "#++" variable lines.
sed -n -e '/^.* stdout [FP] #++.*=.*/d' -e 's/^.* stdout [FP] //p' "$1"
