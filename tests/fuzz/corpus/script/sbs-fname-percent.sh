
#!/bin/bash
#SBATCH -o 100%%-%j.txt
python task.py
