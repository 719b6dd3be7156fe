#!/bin/bash
#SBATCH --gpus=2 -c 4
torchrun --standalone --nnodes=1 --nproc_per_node=2 train.py --epochs 1
