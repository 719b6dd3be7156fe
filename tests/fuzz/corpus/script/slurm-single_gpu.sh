
#!/bin/bash
#SBATCH --job-name=finetune-bert
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --gres=gpu:1
#SBATCH --mem=32G
#SBATCH --time=02:00:00
#SBATCH --output=%x-%j.out
#SBATCH --error=%x-%j.err

set -euo pipefail
echo "Job $SLURM_JOB_ID on $(hostname) with GPU $CUDA_VISIBLE_DEVICES"
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
python finetune.py --model bert-base-uncased --epochs 3 --lr 2e-5
