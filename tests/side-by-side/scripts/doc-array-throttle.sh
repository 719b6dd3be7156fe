#!/bin/bash
# job_array.html: at most two tasks at once, --array=0-5%2.
#SBATCH --array=0-5%2
python task.py
