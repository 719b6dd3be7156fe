#!/bin/bash
#SBATCH --comment=
python task.py
