# expect: gate: subclassing the reference Model
import torch.nn as nn


class ModelNew(Model):  # noqa: F821  (hopes the reference leaks into its namespace)
    pass
