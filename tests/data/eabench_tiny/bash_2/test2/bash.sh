#!/bin/bash
ls data | wc -l
