"""The files Buildshelf keeps: the content-addressed artifact store and its commands' options."""
