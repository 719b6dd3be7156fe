#!/bin/bash
# Followed by dep.then.sh with --dependency=afternotok:<this job>.
#SBATCH -J first
fail 1
