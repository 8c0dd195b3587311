"""Sub-commands of `capacity`: one module each, with ``register(subparsers)``."""
