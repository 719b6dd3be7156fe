
#!/bin/bash
#SBATCH --job-name=infer-a100
#SBATCH --gres=gpu:a100:2
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=2
#SBATCH --time=00:45:00

srun python serve.py --tensor-parallel-size 1
