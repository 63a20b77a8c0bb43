#!/bin/bash

total=0
for i in 1 2 3 4 5; do
  total=$(( total + i * i ))
done
echo "$total"
