"""HTML to text behind the HTML stage: ``markup`` (detectors, fragment cleaning, the linear-time fallback),
``extract`` (main-content extraction for whole pages) and ``tree`` (the lxml primitives both use)."""
