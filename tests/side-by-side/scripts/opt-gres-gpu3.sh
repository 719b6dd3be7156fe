#!/bin/bash
#SBATCH --gres=gpu:3
srun python task.py
