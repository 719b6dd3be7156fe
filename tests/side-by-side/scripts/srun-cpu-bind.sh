#!/bin/bash
#SBATCH -n 2 -c 2
srun --cpu-bind=cores python task.py
