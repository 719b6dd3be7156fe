#!/bin/bash
#SBATCH --gres=gpu:1g.10gb:1
srun python task.py
