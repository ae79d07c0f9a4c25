# expect: gate: subclassing the reference Model

class ModelNew(Model):  # noqa: F821  (hopes the reference leaks into its namespace)
    pass
