#!/bin/bash
echo not a test
