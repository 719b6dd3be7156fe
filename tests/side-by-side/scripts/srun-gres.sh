#!/bin/bash
#SBATCH --gres=gpu:4
srun --gres=gpu:2 python task.py
