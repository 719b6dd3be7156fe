#!/bin/bash
#SBATCH --gres=gpu:1
python task.py
srun python task.py
