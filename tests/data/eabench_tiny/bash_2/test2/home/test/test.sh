#!/bin/bash
#
# Test driver
#
. pre_test.sh
(. bash.sh)
