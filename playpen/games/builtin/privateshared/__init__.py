"""privateshared: a clembench-style game (see README.md). clemcore loads master.py from this
folder as a top-level module; this file only makes the folder a package for packaging."""
