
#!/bin/bash
#SBATCH --mem=4G
python task.py
