
#!/bin/bash
# Followed by dep.then.sh with --dependency=singleton (the same name).
#SBATCH -J first
python task.py
