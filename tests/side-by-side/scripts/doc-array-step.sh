#!/bin/bash
# job_array.html: a step function, --array=1-7:2.
#SBATCH --array=1-7:2
python task.py
