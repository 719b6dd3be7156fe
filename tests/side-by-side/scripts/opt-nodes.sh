#!/bin/bash
#SBATCH -N 1 -n 2
srun python task.py
