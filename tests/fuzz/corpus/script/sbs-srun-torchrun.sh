
#!/bin/bash
#SBATCH -n 1 --gpus-per-node=2 -c 4
srun torchrun --nproc_per_node=2 train.py
