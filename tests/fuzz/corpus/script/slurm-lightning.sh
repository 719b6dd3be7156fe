
#!/bin/bash
#SBATCH --job-name=lightning-vit
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:2
#SBATCH --cpus-per-task=4
#SBATCH --time=48:00:00
#SBATCH --signal=SIGUSR1@90
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=lightning-%j.out

# Lightning's SLURMEnvironment saves a checkpoint on SIGUSR1 and requeues the job.
srun python train_vit.py --trainer.devices=2 --trainer.num_nodes=1
