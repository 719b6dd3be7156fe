#!/bin/bash
set -e
python task.py
fail 5
python never.py
