#!/bin/bash
# As many leaves as serving this model needs: flexsub estimates the GPU memory from the model's
# safetensors headers and config.json (weights, KV cache, activations, 10% margin) and asks
# for that much. See the estimate first with:
#   flexsub --estimate-only model-memory.sh
#FLEX --job-name=serve
#FLEX --model /models/TinyLlama-1.1B --infer --batch-size 8 --seq-len 2048 --dtype bf16
#FLEX --time 1h
python -m my_server --model /models/TinyLlama-1.1B
