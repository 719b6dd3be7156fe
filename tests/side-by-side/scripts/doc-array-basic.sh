#!/bin/bash
# job_array.html: --array=0-15 with %A_%a output files (fewer tasks here).
#SBATCH --array=0-3
#SBATCH --output=array_%A_%a.out
#SBATCH --error=array_%A_%a.err
python task.py $SLURM_ARRAY_TASK_ID
