"""lucid.optim: optimizers with fused C updates, and learning-rate schedulers."""
from lucid.optim import lr_scheduler
from lucid.optim.optimizer import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
