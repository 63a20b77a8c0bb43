#!/bin/bash
if [ $# -ne 1 ]; then
  echo "Usage: $0 <limit>"
  exit 1
fi
is_prime() {
  local n=$1 i
  [ "$n" -lt 2 ] && return 1
  for ((i = 2; i * i <= n; i++)); do
    ((n % i == 0)) && return 1
  done
  return 0
}
for ((k = 3; k + 2 <= $1; k++)); do
  if is_prime $k && is_prime $((k + 2)); then
    echo "$k $((k + 2))"
  fi
done
