#!/bin/bash
#SBATCH --tasks-per-node=2
srun python task.py
