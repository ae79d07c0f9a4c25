"""The pool a run's ``cluster`` setting names (Ray is imported only when a cluster is asked for)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kernelkiln.errors import UserError
from kernelkiln.evaluation.config import ClusterConfig
from kernelkiln.evaluation.pool import EvaluationPool


def open_pool(
    cluster: ClusterConfig,
    platform: str,
    store_url: str,
    device_kind: str | None = None,
    hidden_keys: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> EvaluationPool:
    """The pool ``cluster`` names; ``device_kind``: the kind a resumed run was judged on; ``hidden_keys``:
    variables (a model's key) blanked on the cluster's workers."""
    if cluster.address == "local":
        from kernelkiln.evaluation.local_pool import LocalPool

        return LocalPool()
    try:
        import ray  # noqa: F401
    except ImportError:
        raise UserError("--cluster ray needs Ray: pip install 'kernelkiln[ray]'") from None
    from kernelkiln.evaluation.ray_pool import RayPool

    return RayPool(cluster, platform, store_url, device_kind, hidden_keys, progress)
