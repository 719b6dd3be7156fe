
#!/bin/bash
#SBATCH -n 3
srun python task.py
