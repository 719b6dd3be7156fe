
#!/bin/bash
#SBATCH --job-name=a100-only
#SBATCH --constraint="a100&40gb"
#SBATCH --gres=gpu:2
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --hint=nomultithread
#SBATCH --time=04:00:00

python benchmark.py --amp
