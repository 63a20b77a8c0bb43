#!/bin/bash
#
# Check the outcome
#
if [ -f /home/test/uploads.targets ]; then
    echo Contents of uploads.targets
    cat /home/test/uploads.targets
fi
