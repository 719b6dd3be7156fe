
#!/bin/bash
#SBATCH --gres=gpu:1g.5gb:2
srun python task.py
