#!/bin/bash
# job_array.html: a list of indexes, --array=1,3,5,7.
#SBATCH --array=1,3,5,7
#SBATCH -o list-%a.out
python task.py
