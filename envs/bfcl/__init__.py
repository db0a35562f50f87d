"""BFCL multi-turn (the AppWorld kind): stateful app APIs, several requests per task, the benchmark's checks."""
