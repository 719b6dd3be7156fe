#!/bin/bash
# Submitted after a dep-KIND-*.sh job, with --dependency=KIND:<its id> (or singleton).
python then.py
