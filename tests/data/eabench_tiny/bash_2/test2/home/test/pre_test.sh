#!/bin/bash
# warm-up: record what the evaluator compares against
printf "#++ENTRIES=%s\n" "$(ls -A data | wc -l)"
