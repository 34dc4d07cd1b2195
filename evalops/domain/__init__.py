"""Pure domain logic: no I/O, no database, no CLI. Time is always a parameter."""
