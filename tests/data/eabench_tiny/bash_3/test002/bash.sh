#!/bin/bash
for f in /home/test/downloads/*; do
  if [ -L "$f" ]; then
    basename "$(readlink "$f")"
  fi
done > /home/test/uploads.targets
