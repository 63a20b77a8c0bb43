#!/bin/bash
echo 12345 | rev
