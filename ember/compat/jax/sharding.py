"""``jax.sharding``: meshes, partition specs and shardings (``ember.core.sharding``)."""
from ember.core.sharding import (  # noqa: F401
    AbstractMesh,
    AxisType,
    Device,
    Mesh,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    Sharding,
    SingleDeviceSharding,
    get_mesh,
    set_mesh,
)
from ember.parallel import reshard  # noqa: F401

__all__ = ["AbstractMesh", "AxisType", "Device", "Mesh", "NamedSharding", "PartitionSpec", "PmapSharding", "Sharding",
           "SingleDeviceSharding", "get_mesh", "reshard", "set_mesh"]
