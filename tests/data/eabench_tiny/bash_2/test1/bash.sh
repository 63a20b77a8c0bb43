#!/bin/bash
uname -s
