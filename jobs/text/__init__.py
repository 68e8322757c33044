"""Bytes to text to chunks: file types, the parsers (and OCR) run in a bounded child process,
chunking, and the terms search is made of (tokens, and each chunk's terms with their counts).
Pure: it never imports redis or rq, so every piece can be tested and run on a file alone."""
