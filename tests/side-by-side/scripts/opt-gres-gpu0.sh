#!/bin/bash
#SBATCH --gres=gpu:0
srun python task.py
