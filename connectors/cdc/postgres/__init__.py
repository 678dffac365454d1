"""PostgreSQL change data capture: logical decoding with the built-in ``pgoutput`` plugin."""
