#!/bin/bash
#SBATCH -n 2 -c 4
srun -n 2 -c 2 python task.py
