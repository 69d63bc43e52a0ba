"""What installing ragtrim costs a user: the size, time and packages of a fresh venv for each extra (``footprint``)."""
