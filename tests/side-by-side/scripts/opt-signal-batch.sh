#!/bin/bash
#SBATCH --time=1 --signal=B:USR1@50
trap 'python got-usr1.py; exit 0' USR1
while :; do sleep 1; done
