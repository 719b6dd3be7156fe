
#!/bin/bash
# gres.html: two tasks with one GPU each, bound per task.
#SBATCH -n 2 --gpus-per-task=1
srun python train.py
