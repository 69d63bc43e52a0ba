"""llama.cpp on a CPU: does trimming pay for itself end to end (``cpu``; pure helpers in ``ab``)."""
