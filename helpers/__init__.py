from helpers import log_filters

log_filters.install()  # before any helpers module imports transformers (which imports torchao)
