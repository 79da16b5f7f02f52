"""`bench/loop_overhead.py` in parts: the runtime's overhead per round of the agent loop."""
