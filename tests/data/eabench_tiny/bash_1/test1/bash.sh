#!/bin/bash
echo hello
