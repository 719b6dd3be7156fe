
#!/bin/bash
#SBATCH --array=3,12 -o arr-%4A_%3a.txt -e arr-%j.err
python task.py
