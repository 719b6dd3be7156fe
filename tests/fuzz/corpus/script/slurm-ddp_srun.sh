
#!/bin/bash
#SBATCH --job-name=ddp-resnet
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=2
#SBATCH --mem-per-cpu=4G
#SBATCH --time=12:00:00
#SBATCH --output=logs/%x-%j.out

mkdir -p logs
export MASTER_PORT=$((10000 + SLURM_JOB_ID % 20000))
export WORLD_SIZE=$SLURM_NTASKS
echo "MASTER_ADDR=${MASTER_ADDR:-unset} MASTER_PORT=$MASTER_PORT WORLD_SIZE=$WORLD_SIZE"

srun --cpu-bind=cores python train.py --arch resnet50 --batch-size 256
