#!/bin/bash
#
# Test driver
#
. bash.sh 0x16
. bash.sh 0xff
