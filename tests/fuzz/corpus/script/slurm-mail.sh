
#!/bin/bash
#SBATCH --job-name=eval-nightly
#SBATCH --gres=gpu:1
#SBATCH --time=00:20:00
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=ml-team@example.org
#SBATCH --comment="nightly eval"

python evaluate.py --checkpoint latest.ckpt
