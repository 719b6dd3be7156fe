#!/bin/bash
#SBATCH --gpus-per-node=2
srun python train.py
