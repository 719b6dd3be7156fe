#!/bin/bash
#SBATCH -n 4
srun --ntasks-per-node=2 python task.py
