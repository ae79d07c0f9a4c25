"""A task's op family from the torch ops its reference calls.

The rule, applied to the calls (repeats count, so pass every call, not a set):

1. Each op falls in one family: a *main* one (attention, conv, matmul, norm, softmax,
   pooling, reduction, scan), ``elementwise``, layout (transpose, permute, flip, ...),
   or none (plumbing such as views and allocation, and ops not listed here: ignored).
2. Attention absorbs matmul and softmax: an attention op, or a softmax with two or more
   matmul calls (``softmax(q @ k.T) @ v``), is ``attention``.
3. Elementwise and layout ops never make a task mixed. One main family is the answer,
   except that a matmul with elementwise ops is ``fused_matmul`` (the name the bundled
   suites give a GEMM with an epilogue); conv, norm, ... with elementwise ops stay themselves.
4. Two or more main families: ``mixed``.
5. No main family: ``elementwise`` if any elementwise op ran, else ``transpose`` if a
   layout op ran, else None (unknown).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

MAIN = ("attention", "conv", "matmul", "norm", "softmax", "pooling", "reduction", "scan")

_NAMED: dict[str, frozenset[str]] = {
    "attention": frozenset(
        {
            "scaled_dot_product_attention",
            "multi_head_attention_forward",
            "flash_attention",
            "efficient_attention",
            "flex_attention",
        }
    ),
    "matmul": frozenset(
        {
            "matmul",
            "rmatmul",
            "mm",
            "bmm",
            "linear",
            "addmm",
            "baddbmm",
            "addbmm",
            "einsum",
            "tensordot",
            "dot",
            "vdot",
            "mv",
            "inner",
            "addmv",
            "chain_matmul",
            "multi_dot",
            "bilinear",
        }
    ),
    "softmax": frozenset({"softmax", "log_softmax", "softmin", "gumbel_softmax", "safe_softmax"}),
    "norm": frozenset(
        {
            "layer_norm",
            "rms_norm",
            "group_norm",
            "batch_norm",
            "instance_norm",
            "native_layer_norm",
            "native_batch_norm",
            "native_group_norm",
            "local_response_norm",
            "normalize",
            "fused_rms_norm",
        }
    ),
    "reduction": frozenset(
        {
            "sum",
            "nansum",
            "mean",
            "nanmean",
            "prod",
            "max",
            "min",
            "amax",
            "amin",
            "aminmax",
            "argmax",
            "argmin",
            "var",
            "std",
            "var_mean",
            "std_mean",
            "logsumexp",
            "norm",
            "vector_norm",
            "matrix_norm",
            "linalg_vector_norm",
            "frobenius_norm",
            "all",
            "any",
            "count_nonzero",
            "median",
            "nanmedian",
            "mode",
            "kthvalue",
            "cross_entropy",
            "kl_div",
            "binary_cross_entropy",
            "binary_cross_entropy_with_logits",
            "cosine_similarity",
            "pairwise_distance",
        }
    ),
    "scan": frozenset({"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}),
    "elementwise": frozenset(
        {
            "add",
            "radd",
            "sub",
            "rsub",
            "subtract",
            "mul",
            "rmul",
            "multiply",
            "div",
            "rdiv",
            "divide",
            "true_divide",
            "truediv",
            "rtruediv",
            "floordiv",
            "rfloordiv",
            "floor_divide",
            "neg",
            "negative",
            "pos",
            "abs",
            "exp",
            "exp2",
            "expm1",
            "log",
            "log2",
            "log10",
            "log1p",
            "sqrt",
            "rsqrt",
            "square",
            "pow",
            "rpow",
            "float_power",
            "reciprocal",
            "sign",
            "sgn",
            "floor",
            "ceil",
            "round",
            "trunc",
            "frac",
            "sin",
            "cos",
            "tan",
            "asin",
            "acos",
            "atan",
            "atan2",
            "sinh",
            "cosh",
            "tanh",
            "asinh",
            "acosh",
            "atanh",
            "erf",
            "erfc",
            "erfinv",
            "sigmoid",
            "expit",
            "logit",
            "relu",
            "relu6",
            "leaky_relu",
            "elu",
            "selu",
            "celu",
            "gelu",
            "silu",
            "mish",
            "softplus",
            "softsign",
            "hardtanh",
            "hardsigmoid",
            "hardswish",
            "hardshrink",
            "softshrink",
            "tanhshrink",
            "threshold",
            "logsigmoid",
            "prelu",
            "rrelu",
            "glu",
            "clamp",
            "clip",
            "clamp_min",
            "clamp_max",
            "maximum",
            "minimum",
            "fmax",
            "fmin",
            "where",
            "lerp",
            "addcmul",
            "addcdiv",
            "fmod",
            "remainder",
            "mod",
            "rmod",
            "dropout",
            "dropout1d",
            "dropout2d",
            "dropout3d",
            "alpha_dropout",
            "feature_alpha_dropout",
            "eq",
            "ne",
            "lt",
            "gt",
            "le",
            "ge",
            "greater",
            "less",
            "logical_and",
            "logical_or",
            "logical_not",
            "logical_xor",
            "bitwise_and",
            "bitwise_or",
            "bitwise_xor",
            "bitwise_not",
            "and",
            "or",
            "xor",
            "invert",
            "masked_fill",
            "nan_to_num",
            "xlogy",
            "hypot",
            "copysign",
            "heaviside",
            "sinc",
            "triu",
            "tril",
        }
    ),
    "layout": frozenset(
        {
            "transpose",
            "permute",
            "t",
            "mt",
            "swapaxes",
            "swapdims",
            "movedim",
            "moveaxis",
            "flip",
            "fliplr",
            "flipud",
            "roll",
            "rot90",
        }
    ),
}
_BY_NAME = {name: family for family, names in _NAMED.items() for name in names}


def _name(op: str) -> str:
    """``aten::_softmax.default``, ``__rmatmul__`` and ``add_`` as ``softmax``, ``rmatmul``, ``add``."""
    op = op.rpartition("::")[2].partition(".")[0]
    return op.strip("_").lower()


def family_of_op(op: str) -> str | None:
    """One op's family (``layout`` for views that move data; None when plumbing or unlisted)."""
    name = _name(op)
    if name in _BY_NAME:
        return _BY_NAME[name]
    if "convolution" in name or name.startswith(("conv1d", "conv2d", "conv3d", "conv_transpose", "conv_tbc")):
        return "conv"
    if "pool" in name:
        return "pooling"
    if name.endswith("_loss"):  # mse_loss, huber_loss, ...: a result reduced to a scalar
        return "reduction"
    if "_norm" in name and "vector_norm" not in name and "matrix_norm" not in name:  # native_batch_norm_legit
        return "norm"
    return None


def family_of(ops: Iterable[str]) -> str | None:
    """The op family of a computation that called ``ops`` (see the module's rule); None when unknown."""
    counts = Counter(f for f in map(family_of_op, ops) if f is not None)
    main = {f for f in counts if f in MAIN}
    if "attention" in main or ("softmax" in main and counts["matmul"] >= 2):
        main = (main - {"matmul", "softmax"}) | {"attention"}
    if len(main) > 1:
        return "mixed"
    if main:
        family = main.pop()
        return "fused_matmul" if family == "matmul" and counts["elementwise"] else family
    if counts["elementwise"]:
        return "elementwise"
    return "transpose" if counts["layout"] else None
