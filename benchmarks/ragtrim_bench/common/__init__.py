"""What every benchmark shares: the results folder and result files (``results``), the host a run measured
(``host``), statistics (``stats``) and answer matching (``answers``)."""
