#!/bin/bash
sort -n numbers.txt | tail -n 1
