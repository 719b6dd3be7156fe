#!/bin/bash
#SBATCH -G 2 -n 2
srun python train.py
