"""The Jenkins import: a job's remote API read, fetched, and its artifacts mirrored."""
