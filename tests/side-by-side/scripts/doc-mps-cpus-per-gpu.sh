#!/bin/bash
# gres.html: --cpus-per-gpu with --gpus.
#SBATCH --gpus=2 --cpus-per-gpu=4
python train.py
