#!/bin/bash
#SBATCH --ntasks=2
srun python task.py
