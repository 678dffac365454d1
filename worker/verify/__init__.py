"""`sluice verify`'s engine: in-database checksums of key ranges, bisection, then a row-level compare."""
