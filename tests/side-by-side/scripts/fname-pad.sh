#!/bin/bash
#SBATCH -o pad-%5j-%3n-%2t.txt -e pad-%10j-%12s.err
python task.py
