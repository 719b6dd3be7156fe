#!/bin/bash
#SBATCH -o plain-%A-%a.txt
python task.py
