#!/bin/bash
#SBATCH -n 4
srun -n 1 python one.py
srun --ntasks=2 python two.py
