"""Use cases that join registry files, the store and the pure domain."""
