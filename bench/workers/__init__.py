"""`bench/background.py` in parts: background runs through real `pressloop worker` processes."""
