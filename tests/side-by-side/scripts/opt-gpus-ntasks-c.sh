#!/bin/bash
#SBATCH -n 1 -c 4 --gpus=2
srun python train.py
