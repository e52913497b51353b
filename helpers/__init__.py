from helpers import noise

noise.install()  # before any helpers module imports transformers (which imports torchao)
