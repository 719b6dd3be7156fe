
#!/bin/bash
#SBATCH --array=2-4
python task.py
