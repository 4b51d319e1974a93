"""The PJRT backend: ember's programs lowered to StableHLO (``lowering``) and run by a device vendor's
PJRT plugin through ember's own binding of the PJRT C API (``binding``). Plugins are found by
``discovery``; ``backend`` registers one backend per plugin found, and loads the rest (``program``:
clients, compiled programs, executables) when one is first used."""
