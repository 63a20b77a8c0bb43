#!/bin/bash
ls notes/*.txt | wc -l
