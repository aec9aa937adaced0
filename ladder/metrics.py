"""The metric keys everything agrees on: what the trainer logs, the store holds, the fits read and the watcher checks.

They follow the levanter/Marin names (DESIGN.md); which key a fit uses is a setting. Runs that log other names
are mapped at pull time (`ladder pull ... --rename OLD=NEW`).
"""

TRAIN_LOSS = "train/loss"
TRAIN_CE = "train/cross_entropy_loss"
EVAL_LOSS = "eval/loss"
EVAL_DROPLESS_LOSS = "eval_dropless/loss"
GRAD_NORM = "grad/norm/total"
LEARNING_RATE = "optim/learning_rate"
DROP_FRACTION = "moe/drop_fraction"
LOAD_BALANCING_LOSS = "train/router/load_balancing_loss"
ROUTER_Z_LOSS = "train/router/router_z_loss"
TOKENS_PER_SECOND = "throughput/tokens_per_second"
MFU = "throughput/mfu"
TOKENS_SEEN = "throughput/total_tokens"

DEFAULT_FIT_METRIC = EVAL_LOSS
