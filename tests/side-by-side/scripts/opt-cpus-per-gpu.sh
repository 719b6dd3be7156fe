#!/bin/bash
#SBATCH --gres=gpu:2 --cpus-per-gpu=3
srun python train.py
