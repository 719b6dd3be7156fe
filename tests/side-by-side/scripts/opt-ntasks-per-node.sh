#!/bin/bash
#SBATCH --ntasks-per-node=4
srun python task.py
