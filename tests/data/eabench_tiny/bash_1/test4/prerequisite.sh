#!/bin/bash
./gen.sh > numbers.txt
