#!/bin/bash
# Followed by dep.then.sh with --dependency=afterok:<this job>.
#SBATCH -J first
python task.py
