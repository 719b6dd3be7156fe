
#!/bin/sh
# srun(1) EXAMPLES: eight tasks with labelled output (one node here).
#SBATCH -n 8
srun -n8 -l hostname
