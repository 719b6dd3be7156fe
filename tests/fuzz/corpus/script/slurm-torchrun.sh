
#!/bin/bash
#SBATCH -J llama-lora
#SBATCH -N 1
#SBATCH --gres=gpu:2
#SBATCH -c 8
#SBATCH -t 1-00:00:00
#SBATCH --exclusive=user
#SBATCH -o %x.%j.log

nvidia-smi || true
torchrun --standalone --nnodes=1 --nproc_per_node=2 train_lora.py \
    --model meta-llama/Llama-2-7b-hf --bf16 --gradient-checkpointing
