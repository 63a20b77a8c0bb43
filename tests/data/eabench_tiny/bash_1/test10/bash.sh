#!/bin/bash
touch done.flag
