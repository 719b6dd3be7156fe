#!/bin/bash
#SBATCH --gpus=1g.10gb:2
srun python train.py
