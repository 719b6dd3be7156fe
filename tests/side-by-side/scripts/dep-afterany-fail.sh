#!/bin/bash
# Followed by dep.then.sh with --dependency=afterany:<this job>.
#SBATCH -J first
fail 2
