
#!/bin/bash
#SBATCH --job-name=lr-sweep
#SBATCH --array=0-3%2
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=2
#SBATCH --time=00:30:00
#SBATCH --output=sweep_%A_%a.out

LRS=(1e-3 3e-4 1e-4 3e-5)
LR=${LRS[$SLURM_ARRAY_TASK_ID]}
echo "task $SLURM_ARRAY_TASK_ID of array $SLURM_ARRAY_JOB_ID: lr=$LR"
python train.py --lr "$LR" --run-name "sweep-${SLURM_ARRAY_JOB_ID}-${SLURM_ARRAY_TASK_ID}"
