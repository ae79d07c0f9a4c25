"""Where a run's candidates are judged (``OptimizeConfig.cluster``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ClusterConfig(BaseModel):
    """Where candidates are judged: this machine, or the devices of a Ray cluster."""

    model_config = ConfigDict(extra="forbid")

    address: str = Field(
        "local",
        description="local: this process and machine; ray: the Ray cluster ray.init() "
        "finds ($RAY_ADDRESS), else a new local one; ray://HOST:PORT: a "
        "cluster through Ray Client. Needs kernelkiln[ray] (--cluster).",
    )
    cpus_per_device: int | None = Field(
        None,
        ge=1,
        description="CPU nodes: cores per evaluation device, each a "
        "core set of its own that its timing is pinned to "
        "(None: all of a node's CPUs, as Ray counts them, "
        "are one device).",
    )
    device: str | None = Field(
        None,
        description="The device kind to judge on when the cluster's nodes differ, as "
        "`kiln optimize --cluster` prints it (e.g. 'cuda: NVIDIA H200'); "
        "None: the most numerous kind. Results of two kinds are never "
        "compared.",
    )

    @field_validator("address")
    @classmethod
    def _known_address(cls, value: str) -> str:
        if value in ("local", "ray") or (value.startswith("ray://") and len(value) > len("ray://")):
            return value
        raise ValueError(f"--cluster {value!r}: give local, ray or ray://HOST:PORT")
