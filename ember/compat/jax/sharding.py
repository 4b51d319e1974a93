"""``jax.sharding``: ember's single-device sharding objects (``ember.core.sharding``)."""
from ember.core.sharding import (  # noqa: F401
    AbstractMesh,
    AxisType,
    Mesh,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    Sharding,
    SingleDeviceSharding,
)

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "PartitionSpec", "PmapSharding", "Sharding",
           "SingleDeviceSharding"]
