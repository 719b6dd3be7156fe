
#!/bin/bash
# An existing Slurm script runs unchanged: flexsub reads its #SBATCH lines.
# --gres=gpu:TYPE:N asks for N leaves of that MIG profile; -c is cores per task, and without
# -n/--ntasks every leaf is a task.
#SBATCH --job-name=sbatch-example
#SBATCH --gres=gpu:1g.5gb:2
#SBATCH --cpus-per-task=2
#SBATCH --time=00:30:00
#SBATCH --output=slurm-%j.out
#SBATCH --error=slurm-%j.err
echo "job ${SLURM_JOB_ID:-$FLEX_JOB_ID} on $(hostname), visible devices: $CUDA_VISIBLE_DEVICES"
flexrun --label sh -c 'echo "rank $RANK of $WORLD_SIZE on $CUDA_VISIBLE_DEVICES, cores $FLEX_RANK_CPUS"'
