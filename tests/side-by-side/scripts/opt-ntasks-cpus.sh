#!/bin/bash
#SBATCH -n 2 -c 3
srun python task.py
