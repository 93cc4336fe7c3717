"""leadline: where a Python program's time and memory go."""

__version__ = "0.1.0"
