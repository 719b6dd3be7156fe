#!/bin/bash
# A data-parallel fine-tuning job as a Slurm user writes it: two tasks on one node with one
# GPU each, the rendezvous from scontrol, the output named by the job.
#SBATCH --job-name=bert-finetune
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=32G
#SBATCH --time=00:10:00
#SBATCH --output=%x-%j.out
#SBATCH --error=%x-%j.err

module load cuda/12.1 2>/dev/null || true
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
echo "master $MASTER_ADDR, $SLURM_NTASKS tasks of $SLURM_CPUS_PER_TASK cores"
srun --kill-on-bad-exit=1 python train.py --model bert-base-uncased --epochs 1
