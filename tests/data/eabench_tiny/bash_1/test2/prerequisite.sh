#!/bin/bash
mkdir notes
touch notes/a.txt notes/b.txt notes/c.md
