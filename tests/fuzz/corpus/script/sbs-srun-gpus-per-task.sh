
#!/bin/bash
#SBATCH -n 4 --gres=gpu:4
srun --gpus-per-task=1 python task.py
