#!/bin/bash
#SBATCH -c 4
srun python task.py
