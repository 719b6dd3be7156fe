
#!/bin/bash
#SBATCH --export=ALL,EXTRA=1
python task.py
