#!/bin/bash
#SBATCH --gpus=1 --mem-per-gpu=2G
python task.py
