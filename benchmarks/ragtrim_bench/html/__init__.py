"""HTML main-content extraction: quality against gold article text and speed, ragtrim beside trafilatura
(``extraction``)."""
