#!/bin/bash

