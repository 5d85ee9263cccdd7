"""The clients: the `mosaic` command line and the desktop GUI."""
