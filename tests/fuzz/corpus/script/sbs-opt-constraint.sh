
#!/bin/bash
#SBATCH --constraint=a100 --gres=gpu:1
python task.py
