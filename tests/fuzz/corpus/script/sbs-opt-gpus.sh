
#!/bin/bash
#SBATCH --gpus=2
srun python train.py
