#!/bin/bash
# gres.html: sbatch --gres=gpu:2 with a step per GPU.
#SBATCH --gres=gpu:2 -n 2
srun --gres=gpu:1 -n 1 python a.py &
srun --gres=gpu:1 -n 1 python b.py &
wait
