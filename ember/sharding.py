"""``ember.sharding`` (``jax.sharding``): meshes, partition specs and shardings, beside
``ember.numpy`` as JAX's is beside ``jax.numpy`` (``import ember as jax; from jax.sharding
import Mesh``). The types are ``ember.core.sharding``'s; ``reshard`` is ``ember.parallel``'s."""
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
    get_abstract_mesh,
    get_mesh,
    set_mesh,
)
from ember.parallel import reshard  # noqa: F401

__all__ = ["AbstractMesh", "AxisType", "Device", "Mesh", "NamedSharding", "PartitionSpec", "PmapSharding", "Sharding",
           "SingleDeviceSharding", "get_abstract_mesh", "get_mesh", "reshard", "set_mesh"]
