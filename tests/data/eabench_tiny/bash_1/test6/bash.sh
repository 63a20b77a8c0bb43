#!/bin/bash
find dir -type f | wc -l
