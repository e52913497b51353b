"""Fine-tune BERT on dair-ai/emotion on NVIDIA GPUs (the CPU when none is visible).

    python Nvidia/train.py --model_name_or_path bert-base-uncased --per_device_train_batch_size 8
    torchrun --nproc_per_node=8 Nvidia/train.py --num_devices 8 ...       # DDP over NCCL

`--help` lists every argument (the Hugging Face example names and the notebook's parameter names).
"""

import sys

from torch.distributed.elastic.multiprocessing.errors import record

from helpers import cli

if __name__ == "__main__":
    # under torchrun, record() writes an exception to this rank's error file (TORCHELASTIC_ERROR_FILE),
    # which the launcher reads to say which rank failed and why (helpers/launch.py)
    sys.exit(cli.exit_code(record(cli.main)()))
