"""Bytes to text to chunks: file types, the parsers (and OCR) run in a bounded child process,
chunking and the tokens search is made of. Pure: it never imports redis or rq, so every piece
can be tested and run on a file alone."""
