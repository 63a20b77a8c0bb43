#!/bin/bash
#
# Test driver
#
(. bash.sh 20)
