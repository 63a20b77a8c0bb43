#!/bin/bash
for n in 7 42 3 19; do echo "$n"; done
