#!/bin/bash
#SBATCH --array=0-1 --gres=gpu:1 -n 1
srun python task.py
