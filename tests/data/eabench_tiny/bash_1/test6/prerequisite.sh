#!/bin/bash
mkdir -p dir/sub
touch dir/a.txt dir/b.txt dir/sub/c.log
