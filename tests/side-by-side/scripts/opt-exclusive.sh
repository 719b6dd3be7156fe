#!/bin/bash
#SBATCH --exclusive
srun python task.py
