#!/bin/bash
if [ -z "$1" ]; then
  echo "Usage: $0 <count>"
  exit 1
fi
a=0
b=1
for ((i = 0; i < $1; i++)); do
  echo "$a"
  t=$((a + b)); a=$b; b=$t
done
