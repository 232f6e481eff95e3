"""lucid.optim: optimizers (fused C updates for SGD, Adam, AdamW, RMSprop, Adagrad; lucid-op
updates for Adamax, NAdam, RAdam; L-BFGS) and learning-rate schedulers."""
from lucid.optim import lr_scheduler
from lucid.optim.optimizer import (LBFGS, SGD, Adagrad, Adam, Adamax, AdamW, NAdam, Optimizer,
                                   RAdam, RMSprop)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam",
           "RAdam", "LBFGS", "lr_scheduler"]
