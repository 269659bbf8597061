"""The HTTP side: what a request asks, what is answered and how. It never imports waitress."""
