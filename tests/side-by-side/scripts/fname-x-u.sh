#!/bin/bash
#SBATCH -J fn -o %x-%u.txt
python task.py
