#!/bin/bash
#SBATCH -n 1 -c 10 --gres=gpu:4
srun python train.py
