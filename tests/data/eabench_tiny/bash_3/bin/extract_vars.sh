#!/bin/bash
# NAME=value pairs the hooks printed as "#++NAME=value" lines.
sed -n 's/^.* stdout [FP] #++\(.*=.*\)$/\1/p' "$1"
