"""Registry files -> validated definitions, and their git provenance."""
