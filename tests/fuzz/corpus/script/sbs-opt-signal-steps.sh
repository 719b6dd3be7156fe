
#!/bin/bash
#SBATCH --time=1 --signal=USR1@50
srun sh -c 'trap "python got-usr1.py; exit 0" USR1; while :; do sleep 1; done'
