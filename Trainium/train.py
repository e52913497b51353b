"""Fine-tune BERT on dair-ai/emotion on Trainium (torch-xla; XLA on the CPU without Neuron).

    python Trainium/train.py --model_name_or_path bert-base-uncased --per_device_train_batch_size 8
    torchrun --nproc_per_node=2 Trainium/train.py --num_devices 2 ...    # both NeuronCores of a trn1.2xlarge

`--help` lists every argument (the Hugging Face example names and the notebook's parameter names).
"""

import sys

from torch.distributed.elastic.multiprocessing.errors import record

from helpers import cli

if __name__ == "__main__":
    # under torchrun, record() writes an exception to this rank's error file (TORCHELASTIC_ERROR_FILE),
    # which the launcher reads to say which rank failed and why (helpers/launch.py)
    sys.exit(cli.exit_code(record(cli.main)(defaults={"device": "xla"})))
