#!/bin/bash
#SBATCH -n 2 --gpus-per-task=2
srun python train.py
