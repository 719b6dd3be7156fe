#!/bin/bash
#SBATCH --time=1
python task.py
while :; do sleep 1; done
