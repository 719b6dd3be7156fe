#!/bin/bash
#SBATCH -n 2
srun -l -u python task.py
